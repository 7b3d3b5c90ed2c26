package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// inspector is the MCP inspector's launcher, installed by `npm ci` in
// testdata/inspector (.ci/run does it).
func inspector(t *testing.T) string {
	t.Helper()
	js, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "testdata", "inspector", "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(js); err != nil {
		t.Skipf("the MCP inspector is not installed (run: cd testdata/inspector && npm ci; .ci/run does): %v", err)
	}
	return js
}

// An independent client, the MCP inspector's CLI (TypeScript, the
// protocol's own SDK), lists the tools of `pedigree mcp run` and calls one:
// the upstream's tools are offered under their names with their schemas,
// the result comes back with pedigree's decision, and the call and its
// output are in the store.
func TestInspectorCLI(t *testing.T) {
	fsJS, _ := mcpServers(t)
	launcher := inspector(t)
	c := newEnv(t)
	work := filepath.Join(c.tmp, "work")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "note.txt"), []byte("hello from the note\n"), 0o644)
	c.must("init")
	c.must("mcp", "add", "fs", "--tier", "internal", "--", "node", fsJS, work)
	c.must("registry", "freeze")

	// Each run of the inspector's CLI is one MCP session: it starts the
	// gateway (this test binary as pedigree), initializes, sends one
	// request and prints the result as JSON.
	inspect := func(args ...string) map[string]any {
		t.Helper()
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		argv := append([]string{launcher, "--cli", "-q", "--format", "json", "--connect-timeout", "120000", "-e", "PEDIGREE_CLI_TEST_MAIN=1", "-e", "PEDIGREE_KEYS=" + c.getenv("PEDIGREE_KEYS")}, args...)
		argv = append(argv, "--", self, "--dir", c.dir, "mcp", "run")
		cmd := exec.Command("node", argv...)
		cmd.Dir = c.tmp
		// The inspector keeps its state under HOME; with no keychain here,
		// in a file. It hands the server only the environment named with
		// -e, so the keys directory (the engine's key) is named there.
		cmd.Env = append(os.Environ(), "HOME="+c.tmp, "MCP_INSPECTOR_SECRET_STORE=file")
		var out, errw bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errw
		if err := cmd.Run(); err != nil {
			t.Fatalf("inspector %v: %v\n%s\n%s", args, err, out.String(), errw.String())
		}
		var m struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(out.Bytes(), &m); err != nil || m.Result == nil {
			t.Fatalf("inspector %v printed no result: %v\n%s", args, err, out.String())
		}
		return m.Result
	}

	listed := inspect("--method", "tools/list")
	var read map[string]any
	tools, _ := listed["tools"].([]any)
	for _, x := range tools {
		if tl, _ := x.(map[string]any); tl["name"] == "read_text_file" {
			read = tl
		}
	}
	if len(tools) < 10 || read == nil {
		t.Fatalf("tools/list through the gateway: %d tools, read_text_file %v", len(tools), read)
	}
	if ann, _ := read["annotations"].(map[string]any); ann["readOnlyHint"] != true {
		t.Fatalf("read_text_file lost its annotations: %v", read)
	}
	if schema, _ := read["inputSchema"].(map[string]any); schema["properties"].(map[string]any)["path"] == nil {
		t.Fatalf("read_text_file lost its input schema: %v", read)
	}

	res := inspect("--method", "tools/call", "--tool-name", "read_text_file", "--tool-arg", "path="+filepath.Join(work, "note.txt"))
	content, _ := res["content"].([]any)
	if res["isError"] == true || len(content) == 0 || content[0].(map[string]any)["text"] != "hello from the note\n" {
		t.Fatalf("tools/call through the gateway: %v", res)
	}
	meta, _ := res["_meta"].(map[string]any)
	d, _ := meta["io.pedigree/decision"].(map[string]any)
	if d["decision"] != "allow" || d["decision_id"] == "" || d["output_id"] == "" {
		t.Fatalf("the result's pedigree decision: %v", meta)
	}
	logged := c.must("-o", "json", "gate", "log", "--session", d["session"].(string)).json(t)
	ds, _ := logged["decisions"].([]any)
	if len(ds) != 1 || ds[0].(map[string]any)["decision_id"] != d["decision_id"] || ds[0].(map[string]any)["tool"] != "fs.read_text_file" {
		t.Fatalf("gate log of the inspector's session: %v", logged)
	}
	out := c.must("-o", "json", "lineage", "show", d["output_id"].(string)).json(t)
	if out["kind"] != "tool_output" || out["principal"] != "tool:fs" || out["signature_valid"] != true {
		t.Fatalf("the output entry: %v", out)
	}
}
