//go:build claude

package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
)

// The hooks and the gateway together, with the real Claude Code: the hook
// on every tool, pedigree's MCP gateway as the MCP server "pedigree" in
// front of the reference memory server, both on one data directory through
// 'pedigree serve'. The agent writes a memory through the gateway, reads it
// back, then runs a command: nothing asks, the gateway decided in the
// Claude Code session, and the read's result is the gateway's record (a
// memory read deriving from the write), not an MCP server's output.
func TestClaudeCodeWithGateway(t *testing.T) {
	if os.Getenv("PEDIGREE_NETNS") != "1" {
		reexecIsolatedAs(t, "TestClaudeCodeWithGateway")
		return
	}
	claude, err := filepath.Abs(filepath.Join(npmDir, "node_modules/.bin/claude"))
	if err != nil {
		t.Fatal(err)
	}
	memJS, err := filepath.Abs("../../../../testdata/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{claude, memJS} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("not installed: run 'npm ci' in %s and in testdata/mcp (%v)", npmDir, err)
		}
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "pedigree")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../../cmd/pedigree").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(tmp, "data")
	keys := filepath.Join(tmp, "keys")
	env := append(os.Environ(), "PEDIGREE_KEYS="+keys)
	pedigree := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--dir", data}, args...)...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pedigree %s: %v %s", strings.Join(args, " "), err, exitStderr(err))
		}
		return out
	}
	pedigree("init")
	pedigree("hook", "claude", "init")
	pedigree("mcp", "add", "mem", "--tier", "internal", "--env", "MEMORY_FILE_PATH="+filepath.Join(tmp, "memory.jsonl"), "--", "node", memJS)
	pedigree("registry", "freeze")
	serve := exec.Command(bin, "--dir", data, "serve")
	serve.Env = env
	var serveLog bytes.Buffer
	serve.Stderr = &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Signal(os.Interrupt)
		serve.Wait()
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(data, "serve.json")); err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("pedigree serve did not start: %s", serveLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	settings := filepath.Join(tmp, "settings.json")
	os.WriteFile(settings, hook.CommandSettings(hook.ShellQuote(bin)+" --dir "+hook.ShellQuote(data)+" hook claude").JSON(), 0o644)
	mcpConfig := filepath.Join(tmp, "mcp.json")
	mc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{hook.DefaultGateway: map[string]any{
		"type": "stdio", "command": bin, "args": []string{"--dir", data, "mcp", "run"}, "env": map[string]string{"PEDIGREE_KEYS": keys}}}})
	os.WriteFile(mcpConfig, mc, 0o644)
	work := filepath.Join(tmp, "work")
	os.Mkdir(work, 0o755)
	done := filepath.Join(work, "DONE")

	entity := map[string]any{"name": "release", "entityType": "date", "observations": []any{"ships on friday"}}
	api := &fakeAPI{t: t, results: map[string]toolResult{}, script: map[string][]toolUse{
		"release date": {
			{ID: "toolu_21Remember", Name: "mcp__pedigree__create_entities", Input: map[string]any{"entities": []any{entity}}},
			{ID: "toolu_22Recall", Name: "mcp__pedigree__read_graph", Input: map[string]any{}},
			{ID: "toolu_23Done", Name: "Bash", Input: map[string]any{"command": "touch " + done, "description": "Mark it done"}},
		},
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "remember the release date, read it back, then mark it done", "--output-format", "json",
		"--settings", settings, "--mcp-config", mcpConfig, "--strict-mcp-config",
		"--allowedTools", "mcp__pedigree__create_entities,mcp__pedigree__read_graph,Bash", "--model", "claude-sonnet-4-5")
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(tmp, "home"), "PEDIGREE_KEYS=" + keys,
		"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-ant-test-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("claude -p: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())

	if r := api.results["toolu_22Recall"]; r.IsError || !strings.Contains(r.Content, "ships on friday") {
		t.Fatalf("the memory read through the gateway: %+v", r)
	}
	if _, err := os.Stat(done); err != nil {
		t.Fatalf("the command after reading back its own memory did not run: %v (told: %+v)", err, api.results["toolu_23Done"])
	}
	var log struct {
		Decisions []struct {
			Tool, Principal, Session, Decision string
		}
	}
	if err := json.Unmarshal(pedigree("-o", "json", "gate", "log"), &log); err != nil {
		t.Fatal(err)
	}
	sessions := map[string]string{}
	for _, d := range log.Decisions {
		if d.Decision != "allow" {
			t.Errorf("%s by %s: %s", d.Tool, d.Principal, d.Decision)
		}
		sessions[d.Principal+" "+d.Tool] = d.Session
	}
	claudeSession := sessions["agent:claude-code Bash"]
	for _, k := range []string{"agent:mcp mem.create_entities", "agent:mcp mem.read_graph"} {
		if s, ok := sessions[k]; !ok || s != claudeSession {
			t.Errorf("%s decided in session %q, not the Claude Code session %q", k, s, claudeSession)
		}
	}
	// The hook deferred to the gateway's record of both results.
	labels, _ := filepath.Glob(filepath.Join(data, hook.StateDir, "outputs", "*"))
	deferred := 0
	for _, l := range labels {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "recorded by the gateway") {
			deferred++
		}
	}
	if deferred != 2 {
		t.Errorf("the hook deferred to the gateway for %d results, want 2", deferred)
	}
	t.Logf("one session %s: %d decisions, the gateway's among them; %d results recorded by the gateway alone", claudeSession, len(log.Decisions), deferred)
}

// reexecIsolatedAs runs the test name again in a new network namespace
// with only loopback up.
func reexecIsolatedAs(t *testing.T, name string) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare is needed to run Claude Code without network: %v", err)
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0], "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "PEDIGREE_NETNS=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("the isolated run failed: %v", err)
	}
}
