package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
)

// builtCommand is the command built once per set of build flags.
type builtCommand struct {
	once sync.Once
	bin  string
	err  error
}

// build builds the command with flags (once), into a directory of its own;
// not in -short.
func (b *builtCommand) build(t *testing.T, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the command: not in -short")
	}
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "pedigree-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, "pedigree")
		args := append(append([]string{"build", "-o", b.bin}, flags...), "../../../../cmd/pedigree")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = &exec.Error{Name: string(out), Err: err}
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

var built builtCommand

// pedigreeBinary builds the command once for the tests that run it as a
// hook command would.
func pedigreeBinary(t *testing.T) string { return built.build(t) }

// runNoDir runs pedigree without --dir, in the env's environment.
func (c *cliEnv) runNoDir(args ...string) result {
	var out, errw bytes.Buffer
	a := &app{in: strings.NewReader(""), out: &out, errw: &errw, getenv: c.getenv, clock: c.clock}
	code := a.run(c.t.Context(), args)
	return result{out.String(), errw.String(), code}
}

func jsonFileEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON:\n%s\n%s", a, b)
	}
	return reflect.DeepEqual(x, y)
}

// claudeHome is a fresh HOME with the user's own settings.json, and a git
// repository to work in.
func claudeHome(t *testing.T) (c *cliEnv, home, settings, repo string) {
	c = newEnv(t)
	home = filepath.Join(c.tmp, "home")
	repo = filepath.Join(c.tmp, "repo")
	settings = filepath.Join(home, ".claude", "settings.json")
	for _, d := range []string{filepath.Join(home, ".claude"), filepath.Join(repo, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(settings, []byte(`{"permissions": {"allow": ["Bash(ls:*)"]}, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = map[string]string{"HOME": home, "PEDIGREE_KEYS": ""}
	t.Chdir(repo)
	return c, home, settings, repo
}

// In a fresh HOME: the per-user directories are made where XDG says, the
// keys are private, the user's settings are kept and pedigree's hooks
// merged; a second install writes nothing; uninstall gives the settings
// back.
func TestClaudeInstall(t *testing.T) {
	bin := pedigreeBinary(t)
	c, home, settings, _ := claudeHome(t)
	orig, _ := os.ReadFile(settings)
	r := c.runNoDir("claude", "install", "--command", bin)
	if r.code != 0 {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.out, r.err)
	}
	data := filepath.Join(home, ".local", "share", "pedigree")
	keys := filepath.Join(home, ".config", "pedigree", "keys")
	for _, d := range []string{keys, filepath.Join(data, hook.KeyDir)} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 directory", d, err, fi)
		}
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if fi, _ := e.Info(); strings.HasSuffix(e.Name(), ".key") && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s: mode %v", d, e.Name(), fi.Mode())
			}
		}
	}
	after, _ := os.ReadFile(settings)
	if has, _ := hook.HasPedigreeHooks(after); !has || !strings.Contains(string(after), "echo mine") || !strings.Contains(string(after), "Bash(ls:*)") {
		t.Fatalf("settings after install:\n%s", after)
	}
	if b, _ := os.ReadFile(settings + ".pedigree-backup"); string(b) != string(orig) {
		t.Errorf("the backup is not the file as it was: %s", b)
	}
	if !strings.Contains(r.out, "self-test: a clean session's 'ls' was allowed") || !strings.Contains(r.out, "pedigree claude uninstall") {
		t.Errorf("install did not say what it did and how to undo it:\n%s", r.out)
	}
	if r := c.runNoDir("claude", "install", "--command", bin); r.code != 0 {
		t.Fatalf("second install: exit %d\n%s", r.code, r.err)
	}
	if again, _ := os.ReadFile(settings); string(again) != string(after) {
		t.Fatalf("a second install changed settings.json")
	}
	if r := c.runNoDir("claude", "uninstall"); r.code != 0 {
		t.Fatalf("uninstall: %d %s", r.code, r.err)
	}
	back, _ := os.ReadFile(settings)
	if !jsonFileEqual(t, back, orig) {
		t.Fatalf("uninstall did not give the settings back:\n%s", back)
	}
}

// A hook that lets everything through fails the self-test, and then
// settings.json is not touched.
func TestClaudeInstallSelfTestFails(t *testing.T) {
	c, _, settings, _ := claudeHome(t)
	orig, _ := os.ReadFile(settings)
	fake := filepath.Join(c.tmp, "pedigree")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\ncat >/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := c.runNoDir("claude", "install", "--command", fake)
	if r.code != ExitError || !strings.Contains(r.err, "not stopped") {
		t.Fatalf("install with a hook that stops nothing: exit %d\n%s", r.code, r.err)
	}
	if now, _ := os.ReadFile(settings); string(now) != string(orig) {
		t.Fatal("settings.json changed although the self-test failed")
	}
}

// Keys never go into the repository being protected; trust is never
// declared by default, and --trust-workspace outside a repository is a
// usage error.
func TestClaudeInstallRefuses(t *testing.T) {
	c, _, _, repo := claudeHome(t)
	if r := c.runNoDir("--dir", filepath.Join(repo, ".pedigree"), "claude", "install", "--command", "/bin/true"); r.code != ExitUsage || !strings.Contains(r.err, "inside the git repository") {
		t.Fatalf("data directory in the repository: exit %d %s", r.code, r.err)
	}
	c.env["PEDIGREE_KEYS"] = filepath.Join(repo, "keys")
	if r := c.runNoDir("claude", "install", "--command", "/bin/true"); r.code != ExitUsage || !strings.Contains(r.err, "PEDIGREE_KEYS") {
		t.Fatalf("keys in the repository: exit %d %s", r.code, r.err)
	}
	if _, err := os.Stat(filepath.Join(repo, "keys")); err == nil {
		t.Fatal("a keys directory was made in the repository")
	}
	c.env["PEDIGREE_KEYS"] = ""
	t.Chdir(c.tmp)
	if r := c.runNoDir("claude", "install", "--trust-workspace", "--command", "/bin/true"); r.code != ExitUsage {
		t.Fatalf("--trust-workspace outside a repository: exit %d %s", r.code, r.err)
	}
	if r := c.runNoDir("claude", "install", "--project", "--settings", "x.json"); r.code != ExitUsage {
		t.Fatalf("--project with --settings: exit %d", r.code)
	}
}

// --project writes the repository's .claude/settings.json, at its root.
func TestClaudeInstallProject(t *testing.T) {
	bin := pedigreeBinary(t)
	c, _, settings, repo := claudeHome(t)
	orig, _ := os.ReadFile(settings)
	sub := filepath.Join(repo, "sub")
	os.Mkdir(sub, 0o755)
	t.Chdir(sub)
	if r := c.runNoDir("claude", "install", "--project", "--command", bin); r.code != 0 {
		t.Fatalf("install --project: exit %d %s", r.code, r.err)
	}
	b, err := os.ReadFile(filepath.Join(repo, ".claude", "settings.json"))
	if has, _ := hook.HasPedigreeHooks(b); err != nil || !has {
		t.Fatalf("project settings: %v %s", err, b)
	}
	if now, _ := os.ReadFile(settings); string(now) != string(orig) {
		t.Fatal("--project changed the user's settings")
	}
	if r := c.runNoDir("claude", "uninstall", "--project"); r.code != 0 {
		t.Fatal(r.err)
	}
	b, _ = os.ReadFile(filepath.Join(repo, ".claude", "settings.json"))
	if !jsonFileEqual(t, b, []byte(`{}`)) {
		t.Fatalf("after uninstall --project: %s", b)
	}
}

// A gateway on a data directory too long for DIR/pedigree.sock still
// serves it (on a socket in the runtime directory), so the hooks and verbs
// beside it reach the store instead of waiting for it.
func TestGatewayServesALongDirectory(t *testing.T) {
	c := newEnv(t)
	c.dir = filepath.Join(c.tmp, strings.Repeat("a-rather-long-directory-name/", 4), "data")
	c.bootstrap()
	c.env = map[string]string{"XDG_RUNTIME_DIR": filepath.Join(c.tmp, "rt")}
	os.Mkdir(c.env["XDG_RUNTIME_DIR"], 0o700)
	a := &app{dir: c.dir, getenv: c.getenv, clock: c.clock, in: strings.NewReader(""), out: io.Discard, errw: io.Discard}
	_, done, err := a.gatewayBackend(t.Context(), slog.New(slog.DiscardHandler), gateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if r := c.run("--lock-wait", "0s", "registry", "list"); r.code != 0 {
		t.Fatalf("a verb beside the gateway: exit %d %s", r.code, r.err)
	}
	if _, err := os.Stat(filepath.Join(c.env["XDG_RUNTIME_DIR"], "pedigree")); err != nil {
		t.Fatal(err)
	}
}

// --mcp moves the stdio MCP servers Claude Code has (the user's, the
// project's in ~/.claude.json, the repository's .mcp.json) behind the
// one-line gateway, keeping every other key; the moved server runs and
// lists its tools through the gateway; a second install changes nothing;
// uninstall puts every entry back.
func TestClaudeInstallMCP(t *testing.T) {
	bin := pedigreeBinary(t)
	_, memJS := mcpServers(t)
	c, home, _, repo := claudeHome(t)
	mem := filepath.Join(c.tmp, "memory.jsonl")
	claudeJSON := filepath.Join(home, ".claude.json")
	orig := []byte(`{"numStartups": 3,
 "mcpServers": {"memory": {"command": "node", "args": [` + strconvQuote(memJS) + `], "env": {"MEMORY_FILE_PATH": ` + strconvQuote(mem) + `}},
                "remote": {"type": "http", "url": "https://mcp.example.org/"}},
 "projects": {` + strconvQuote(repo) + `: {"allowedTools": [], "mcpServers": {"Local Notes": {"type": "stdio", "command": "node", "args": [` + strconvQuote(memJS) + `]}}}}}`)
	if err := os.WriteFile(claudeJSON, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	dotMCP := filepath.Join(repo, ".mcp.json")
	origDot := []byte(`{"mcpServers": {"team-mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`)
	os.WriteFile(dotMCP, origDot, 0o644)

	r := c.runNoDir("claude", "install", "--mcp", "--command", bin)
	if r.code != 0 {
		t.Fatalf("install --mcp: exit %d\n%s%s", r.code, r.out, r.err)
	}
	var cfg struct {
		NumStartups int `json:"numStartups"`
		MCPServers  map[string]struct {
			Command   string
			Args      []string
			Type, URL string
		} `json:"mcpServers"`
		Projects map[string]struct {
			MCPServers map[string]struct {
				Command string
				Args    []string
			} `json:"mcpServers"`
		} `json:"projects"`
	}
	after, _ := os.ReadFile(claudeJSON)
	if err := json.Unmarshal(after, &cfg); err != nil {
		t.Fatal(err)
	}
	m := cfg.MCPServers["memory"]
	if cfg.NumStartups != 3 || m.Command != bin || strings.Join(m.Args, " ") != "mcp run --name memory -- node "+memJS || cfg.MCPServers["remote"].URL == "" {
		t.Fatalf("~/.claude.json after install --mcp:\n%s", after)
	}
	if p := cfg.Projects[repo].MCPServers["Local Notes"]; strings.Join(p.Args, " ") != "mcp run --name local-notes -- node "+memJS {
		t.Fatalf("the project's server: %+v", p)
	}
	if b, _ := os.ReadFile(dotMCP); !strings.Contains(string(b), `"mcp",`) || !strings.Contains(string(b), `"--name",`) {
		t.Fatalf(".mcp.json: %s", b)
	}
	if !strings.Contains(r.out, "remote: a http server") {
		t.Errorf("install did not say it left the http server:\n%s", r.out)
	}

	// The moved server, run as Claude Code would run it.
	cmd := exec.Command(m.Command, m.Args...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "MEMORY_FILE_PATH=" + mem}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	listed := ""
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"id":2`) {
			listed = sc.Text()
			break
		}
	}
	stdin.Close()
	cmd.Wait()
	if !strings.Contains(listed, "create_entities") || !strings.Contains(stderr.String(), "tier external") {
		t.Fatalf("the moved server through the gateway: %q\n%s", listed, stderr.String())
	}

	if r := c.runNoDir("claude", "install", "--mcp", "--command", bin); r.code != 0 {
		t.Fatalf("second install: %d %s", r.code, r.err)
	}
	if again, _ := os.ReadFile(claudeJSON); string(again) != string(after) {
		t.Fatal("a second install --mcp changed ~/.claude.json")
	}
	if r := c.runNoDir("claude", "uninstall"); r.code != 0 {
		t.Fatalf("uninstall: %d %s", r.code, r.err)
	}
	back, _ := os.ReadFile(claudeJSON)
	backDot, _ := os.ReadFile(dotMCP)
	if !jsonFileEqual(t, back, orig) || !jsonFileEqual(t, backDot, origDot) {
		t.Fatalf("uninstall did not put the MCP servers back:\n%s\n%s", back, backDot)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// --trust-workspace declares the repository (clean's hook.TrustWorkspace),
// sealed; without it, and without a terminal, nothing is declared.
func TestClaudeInstallTrustWorkspace(t *testing.T) {
	bin := pedigreeBinary(t)
	c, home, _, repo := claudeHome(t)
	os.RemoveAll(filepath.Join(repo, ".git"))
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "i"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	mapping := filepath.Join(home, ".local", "share", "pedigree", hook.MappingFile)
	if r := c.runNoDir("claude", "install", "--command", bin); r.code != 0 {
		t.Fatal(r.err)
	}
	if b, _ := os.ReadFile(mapping); strings.Contains(string(b), repo) {
		t.Fatal("install declared the workspace without being asked")
	}
	if r := c.runNoDir("claude", "install", "--trust-workspace", "--command", bin); r.code != 0 || !strings.Contains(r.out, "trusted the workspace "+repo) {
		t.Fatalf("install --trust-workspace: %d %s%s", r.code, r.out, r.err)
	}
	if b, _ := os.ReadFile(mapping); !strings.Contains(string(b), repo) {
		t.Fatalf("the declaration is not in the mapping:\n%s", b)
	}
	if r := c.run("--dir", filepath.Join(home, ".local", "share", "pedigree"), "verify"); r.code != 0 {
		t.Fatalf("verify after the declaration (sealed?): %d %s", r.code, r.err)
	}
}
