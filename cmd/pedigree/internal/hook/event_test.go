package hook_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
)

// FuzzParseEvent: any input is an event that passes every check, or
// ErrEvent; never a panic, and never a session ID that could name a file
// outside its directory by itself being a path.
func FuzzParseEvent(f *testing.F) {
	for _, dir := range []string{"../../../../testdata/hook/claude", "../../../../testdata/hook/claude/real"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"session_id":"a/b","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := hook.ParseEvent(b)
		if err != nil {
			if !errors.Is(err, hook.ErrEvent) {
				t.Fatalf("an error that is not ErrEvent: %v", err)
			}
			return
		}
		if ev.SessionID == "" || strings.HasPrefix(ev.SessionID, ".") || strings.HasPrefix(ev.SessionID, "/") || strings.ContainsAny(ev.SessionID, "\\\x00") {
			t.Fatalf("session_id %q accepted", ev.SessionID)
		}
		switch ev.HookEventName {
		case hook.PreToolUse, hook.PostToolUse, hook.PostToolUseFailure:
			if !json.Valid(ev.ToolInput) || ev.ToolInput[0] != '{' {
				t.Fatalf("tool_input %q accepted", ev.ToolInput)
			}
		}
	})
}

func TestDefaultMappingIsValid(t *testing.T) {
	dir := t.TempDir()
	m := hook.DefaultMapping(hook.DefaultUser)
	for _, tool := range []string{"WebFetch", "mcp__memory__read_graph", "Read", "SomeNewTool"} {
		if o := m.Output(tool); o.Principal == "" {
			t.Fatalf("%s has no output principal", tool)
		}
	}
	if !m.Output("TodoWrite").Skip {
		t.Fatal("TodoWrite's output is recorded")
	}
	if _, err := hook.LoadMapping(dir); err == nil || !strings.Contains(err.Error(), "hook claude init") {
		t.Fatalf("a directory without a mapping: %v", err)
	}
	// A mapping that signs a tool's output as the user is refused.
	bad := "version: 1\nuser: user:claude\nagent: agent:claude-code\nprincipals:\n  user:claude: {tier: user, key: hook-keys/u.key}\n  agent:claude-code: {tier: internal, key: hook-keys/a.key}\ntools: {}\nmcp: {principal: user:claude}\ndefault: {principal: user:claude}\n"
	os.WriteFile(filepath.Join(dir, hook.MappingFile), []byte(bad), 0o644)
	if _, err := hook.LoadMapping(dir); err == nil || !strings.Contains(err.Error(), "must be unverified or external") {
		t.Fatalf("a mapping that launders tool output as the user's: %v", err)
	}
	// With an unverified tool principal it loads; with a key outside the
	// data directory it does not.
	good := "version: 1\nuser: user:claude\nagent: agent:claude-code\nprincipals:\n  user:claude: {tier: user, key: hook-keys/u.key}\n  agent:claude-code: {tier: internal, key: hook-keys/a.key}\n  tool:t: {tier: unverified, key: hook-keys/t.key}\ntools: {}\nmcp: {principal: tool:t}\ndefault: {principal: tool:t}\n"
	os.WriteFile(filepath.Join(dir, hook.MappingFile), []byte(good), 0o644)
	if _, err := hook.LoadMapping(dir); err != nil {
		t.Fatalf("a valid mapping: %v\n%s", err, good)
	}
	os.WriteFile(filepath.Join(dir, hook.MappingFile), []byte(strings.Replace(good, "hook-keys/u.key", "../../../../u.key", 1)), 0o644)
	if _, err := hook.LoadMapping(dir); err == nil || !strings.Contains(err.Error(), "inside the data directory") {
		t.Fatalf("a key outside the data directory: %v", err)
	}
}
