package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/registry"
)

// claudeServer is a frozen data directory set up for the hook, served.
func claudeServer(t *testing.T, enable bool) (s *server.Server, token string) {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	op, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := pedigree.Init(ctx, dir, pedigree.DefaultTau, pedigree.WithOperatorSigner(op))
	if err != nil {
		t.Fatal(err)
	}
	if err := hook.Init(ctx, e, hook.DefaultMapping(hook.DefaultUser)); err != nil {
		t.Fatal(err)
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		t.Fatal(err)
	}
	// Reopened, as 'pedigree serve' would be, to load the tools.yaml that
	// init wrote.
	e.Close()
	if e, err = pedigree.Open(ctx, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s = server.New(e, nil)
	if enable {
		if err := s.EnableClaudeHooks(); err != nil {
			t.Fatal(err)
		}
	}
	token, _ = hook.Token(dir)
	return s, token
}

func postHook(t *testing.T, h http.Handler, token, method, body string) hook.Answer {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1:7777/v1/hooks/claude", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d (Claude Code lets the call through on any status but 200): %s", rec.Code, rec.Body)
	}
	var a hook.Answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("not an answer: %v: %s", err, rec.Body)
	}
	return a
}

func fixture(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("../../../../testdata/hook/claude", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClaudeHookRoute(t *testing.T) {
	srv, token := claudeServer(t, true)
	h := srv.Handler()
	for _, name := range []string{"session_start", "user_prompt_submit", "pre_tool_use_read", "post_tool_use_read"} {
		if a := postHook(t, h, token, "POST", fixture(t, name)); a != (hook.Answer{}) {
			t.Fatalf("%s: %+v, want an empty answer", name, a)
		}
	}
	a := postHook(t, h, token, "POST", fixture(t, "pre_tool_use_bash"))
	if a.HookSpecificOutput == nil || a.HookSpecificOutput.PermissionDecision != "ask" || !strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, "NOTES.md") {
		t.Fatalf("the Bash call after a poisoned Read: %+v", a.HookSpecificOutput)
	}
}

// Every failure is a 200 whose body blocks.
func TestClaudeHookRouteBlocksOnErrors(t *testing.T) {
	srv, token := claudeServer(t, true)
	h := srv.Handler()
	pre := fixture(t, "pre_tool_use_bash")
	stops := func(a hook.Answer) bool { return a.Continue != nil && !*a.Continue && a.StopReason != "" }
	denies := func(a hook.Answer) bool {
		return a.HookSpecificOutput != nil && a.HookSpecificOutput.PermissionDecision == "deny"
	}
	cases := []struct {
		name, token, method, body string
		blocked                   func(hook.Answer) bool
	}{
		{"no token", "", "POST", pre, stops},
		{"wrong token", strings.Repeat("0", 64), "POST", pre, stops},
		{"GET", token, "GET", "", stops},
		{"truncated", token, "POST", pre[:40], stops},
		{"unknown event", token, "POST", `{"session_id":"s","hook_event_name":"Nope"}`, stops},
		{"bad tool name", token, "POST", `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"a b","tool_input":{}}`, stops},
		{"prompt not a string", token, "POST", `{"session_id":"s","hook_event_name":"UserPromptSubmit","prompt":7}`, stops},
		{"arguments too large to check", token, "POST", `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":` + manyKeys(8000) + `}`, denies},
	}
	for _, tc := range cases {
		if a := postHook(t, h, tc.token, tc.method, tc.body); !tc.blocked(a) {
			t.Errorf("%s: %+v does not block", tc.name, a)
		}
	}
	// Behind the server's own authentication (as Run serves it), the
	// route is reached with the hook's token alone, and a browser's request
	// is answered with a block, not a 4xx.
	auth := srv.Authenticated(strings.Repeat("f", 64))
	if a := postHook(t, auth, token, "POST", fixture(t, "user_prompt_submit")); a != (hook.Answer{}) {
		t.Fatalf("behind the server's token check: %+v", a)
	}
	req := httptest.NewRequest("POST", "http://127.0.0.1:7777/v1/hooks/claude", strings.NewReader(pre))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Origin", "https://evil.example")
	rec := httptest.NewRecorder()
	auth.ServeHTTP(rec, req)
	var a hook.Answer
	json.Unmarshal(rec.Body.Bytes(), &a)
	if rec.Code != 200 || !stops(a) {
		t.Fatalf("a browser's request: %d %s", rec.Code, rec.Body)
	}
	off, _ := claudeServer(t, false)
	if a := postHook(t, off.Handler(), token, "POST", pre); !stops(a) || !strings.Contains(a.StopReason, "--claude-hooks") {
		t.Fatalf("a server without --claude-hooks: %+v", a)
	}
}

// manyKeys is a JSON object over the arguments' limit even with its long
// values digested.
func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"key%06d":1`, i)
	}
	return "{" + strings.Join(keys, ",") + "}"
}
