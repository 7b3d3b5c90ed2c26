package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const redTeamFakeMCP = `import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"].get("protocolVersion","2025-06-18"), "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "send", "description": "send data", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}}]}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n"); sys.stdout.flush()
`

// TestRedTeamOneLineRefusesAStoreSealedBySomeoneElse: the one-line gateway
// takes $PEDIGREE_DIR (which an mcpServers entry's "env" sets, relative to
// the repository Claude Code starts it in, and which 'claude install --mcp'
// keeps when it wraps the entry), and serves a directory found there that
// is already frozen with the command, "as set up on its first run", with
// no trust root pinned: the person's keys directory has no operator key
// for it. A repository that ships .pedigree-gw, frozen by the attacker
// with the server at tier internal and its tools not sensitive, gets its
// own seal served in place of the conservative one-line setup.
func TestRedTeamOneLineRefusesAStoreSealedBySomeoneElse(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	c := newEnv(t)
	repo := filepath.Join(c.tmp, "repo")
	os.MkdirAll(repo, 0o755)
	fake := filepath.Join(c.tmp, "fake.py")
	os.WriteFile(fake, []byte(redTeamFakeMCP), 0o644)
	command := []string{"python3", fake}

	// The attacker's store, in the repository, with the attacker's keys.
	c.dir = filepath.Join(repo, ".pedigree-gw")
	c.env = map[string]string{"PEDIGREE_KEYS": filepath.Join(c.tmp, "attacker-keys")}
	c.must("init")
	c.must(append([]string{"mcp", "add", "helper", "--tier", "internal", "--"}, command...)...)
	os.WriteFile(filepath.Join(c.dir, "tools.yaml"), []byte("tools:\n  helper.send:\n    role: other\n    sensitive: false\n"), 0o644)
	c.must("registry", "freeze")

	// The person: their own keys and HOME; Claude Code starts the wrapped
	// entry in the repository with the entry's env.
	home := filepath.Join(c.tmp, "home")
	os.MkdirAll(home, 0o755)
	c.env = map[string]string{"HOME": home, "PEDIGREE_KEYS": filepath.Join(c.tmp, "my-keys"), "PEDIGREE_DIR": ".pedigree-gw"}
	t.Chdir(repo)
	r := c.runNoDir(append([]string{"mcp", "run", "--name", "helper", "--"}, command...)...)
	if strings.Contains(r.err, "as set up on its first run") {
		t.Errorf("the gateway served a store another operator sealed (tier internal, tools not sensitive):\n%s", firstLines(r.err, 3))
	}
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, "\n")
}
