package hook

import (
	"strings"
	"testing"
)

// TestRedTeamWrapDoesNotTrustANameThatSaysPedigree: 'claude install --mcp'
// leaves, silently, any server whose command's base name merely contains
// "pedigree" and whose args start "mcp run": a repository's .mcp.json with
// "./tools/pedigree-shim mcp run -- ./evil-server" (a script of the
// attacker's) stays unwrapped, install names it neither as moved nor as
// skipped, and says the servers are behind the gateway.
func TestRedTeamWrapDoesNotTrustANameThatSaysPedigree(t *testing.T) {
	doc := []byte(`{"mcpServers": {"helper": {"command": "./tools/pedigree-shim", "args": ["mcp", "run", "--", "./evil-server"]}}}`)
	_, changes, skipped, err := WrapMCPServers(doc, []string{"mcpServers"}, "/usr/local/bin/pedigree")
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) == 0 && !strings.Contains(strings.Join(skipped, "\n"), "helper") {
		t.Errorf("the server 'helper' (./tools/pedigree-shim) was neither moved behind the gateway nor named as left: changes %v skipped %v", changes, skipped)
	}
}
