package cli

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestRegistryOnStart(t *testing.T) {
	for cmd, warns := range map[string]bool{
		"npx -y @modelcontextprotocol/server-memory":           true,
		"npx @modelcontextprotocol/server-memory":              true,
		"npx --no-install @modelcontextprotocol/server-memory": false,
		"uvx mcp-server-fetch":                                 true,
		"pipx run mcp-server-fetch":                            true,
		"pnpm dlx @x/y":                                        true,
		"bunx @x/y":                                            true,
		"node /opt/mcp/server-memory/dist/index.js":            false,
		"/usr/local/bin/mcp-server-fetch":                      false,
	} {
		if got := registryOnStart(strings.Fields(cmd)) != ""; got != warns {
			t.Errorf("%s: warns %v, want %v", cmd, got, warns)
		}
	}
}

func TestUpstreamName(t *testing.T) {
	for cmd, want := range map[string]string{
		"npx -y @modelcontextprotocol/server-memory":                    "memory",
		"npx -y @modelcontextprotocol/server-filesystem@2025.1.1 /work": "filesystem",
		"node /opt/mcp/node_modules/server-memory/dist/index.js":        "memory",
		"uvx mcp-server-fetch":                                          "fetch",
		"python3 -m weather_mcp":                                        "weather_mcp",
		"/usr/local/bin/github-mcp-server stdio":                        "github",
		"docker run -i --rm ghcr.io/x/Y.Z":                              "y-z",
		"node":                                                          "upstream",
	} {
		if got := upstreamName(strings.Fields(cmd)); got != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
}

// oneLine runs 'pedigree mcp run -- COMMAND' as an mcpServers entry would:
// no --dir, only HOME in the environment.
func (c *cliEnv) oneLine(t *testing.T, errw io.Writer, command ...string) *gatewayProc {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &gatewayProc{t: t, in: inW, out: bufio.NewReader(outR), code: make(chan int, 1)}
	go func() {
		a := &app{in: inR, out: outW, errw: errw, getenv: c.getenv, clock: c.clock}
		p.code <- a.run(context.Background(), append([]string{"mcp", "run", "--"}, command...))
		outW.Close()
	}()
	p.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "cli-test", "version": "1"}})
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized", "params": map[string]any{}})
	return p
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// On a machine where nothing is set up, the one-line form makes its own
// per-user directory, seals the upstream at tier external, says so on
// stderr, and gates: what the upstream returned cannot justify a
// sensitive call. The second run serves what the first sealed.
func TestMCPRunOneLine(t *testing.T) {
	_, memJS := mcpServers(t)
	c := newEnv(t)
	home := filepath.Join(c.tmp, "home")
	c.env = map[string]string{"HOME": home, "PEDIGREE_KEYS": ""}
	t.Setenv("MEMORY_FILE_PATH", filepath.Join(c.tmp, "memory.jsonl"))
	var errw lockedBuilder
	p := c.oneLine(t, &errw, "node", memJS)
	tools := string(p.request("tools/list", map[string]any{}))
	if !strings.Contains(tools, "create_entities") {
		t.Fatalf("tools/list: %s", tools)
	}
	r := p.call(t, "create_entities", map[string]any{"entities": []any{map[string]any{"name": "Alice", "entityType": "person", "observations": []any{"pays rent to 123-456"}}}})
	if r.IsError {
		t.Fatalf("a clean session's write was refused: %s", r.text())
	}
	if r := p.call(t, "read_graph", map[string]any{}); r.IsError {
		t.Fatalf("read_graph: %s", r.text())
	}
	r = p.call(t, "create_entities", map[string]any{"entities": []any{map[string]any{"name": "Mallory", "entityType": "person", "observations": []any{"pays rent to 999-666"}}}})
	if !r.IsError || !strings.HasPrefix(r.text(), "pedigree denied") {
		t.Fatalf("a write relying on what the external upstream returned was not denied: %s", r.text())
	}
	p.stop(t)
	dirs, _ := filepath.Glob(filepath.Join(home, ".local", "share", "pedigree", "mcp", "memory-*"))
	if len(dirs) != 1 {
		t.Fatalf("per-user directory: %v", dirs)
	}
	for _, want := range []string{"first run: created the data directory " + dirs[0], "tier external", "froze the registry"} {
		if !strings.Contains(errw.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, errw.String())
		}
	}
	if fi, err := os.Stat(filepath.Join(home, ".config", "pedigree", "keys")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("keys directory: %v %v", fi, err)
	}
	var again lockedBuilder
	p = c.oneLine(t, &again, "node", memJS)
	if r := p.call(t, "read_graph", map[string]any{}); r.IsError || !strings.Contains(r.text(), "Alice") {
		t.Fatalf("second run: %s", r.text())
	}
	p.stop(t)
	if strings.Contains(again.String(), "first run:") || !strings.Contains(again.String(), "as set up on its first run") {
		t.Fatalf("second run's stderr:\n%s", again.String())
	}
}
