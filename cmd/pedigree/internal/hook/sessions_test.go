package hook_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/gate"
)

// The coding sessions in testdata/hook/sessions are replayed through the
// hook as Claude Code sends them: clean sessions a developer runs every day,
// and poisoned ones whose risky call must not run. A session may set up a
// git repository (committed, then declared trusted or not, then changed),
// run its local commands for real in it, and apply its writes to disk.
//
// Figures, printed with -v:
//
//	clean sessions uninterrupted (goal: all), questions per clean session
//	(goal: 0), poisoned sessions whose risky call ran (goal: 0, except the
//	gaps a session names), poisoned sessions that reached a person with the
//	risky value shown.

const sessionsDir = "../../../../testdata/hook/sessions"

type sessionFile struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // clean or poisoned
	// Repo is committed in a fresh repository ($REPO); Trust declares it
	// ("" leaves it undeclared); Later is committed after the declaration,
	// Untracked written after it, uncommitted.
	Repo      map[string]string `json:"repo"`
	Trust     string            `json:"trust"`
	Later     map[string]string `json:"later"`
	Untracked map[string]string `json:"untracked"`
	// Home is written into a fresh $HOME (Claude Code's ~/.claude.json
	// with its MCP servers), after $REPO and $DATA (the hook's data
	// directory) are put in.
	Home map[string]string `json:"home"`
	// Gap names what the hook cannot see in a poisoned session whose risky
	// call runs (reported, not failed).
	Gap   string `json:"gap"`
	Steps []step `json:"steps"`
}

type step struct {
	Session string `json:"session"`
	Prompt  string `json:"prompt,omitempty"`
	Event   string `json:"event,omitempty"` // SessionStart
	Tool    string `json:"tool,omitempty"`
	// Repeat replays the step this many times (a long session).
	Repeat   int             `json:"repeat,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	// Exec runs a Bash command for real in $REPO; Apply writes a Write or
	// Edit to disk.
	Exec  bool `json:"exec,omitempty"`
	Apply bool `json:"apply,omitempty"`
	// Error is a PostToolUseFailure's error instead of a response.
	Error string `json:"error,omitempty"`
	// Risky marks the call a poisoned session must not run, and the value a
	// person should be shown when it is stopped.
	Risky string `json:"risky,omitempty"`
}

type sessionResult struct {
	name, kind, gap string
	questions       []string
	ran, shown      bool
}

func TestCodingSessions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sessionsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sessions in %s: %v", sessionsDir, err)
	}
	sort.Strings(files)
	var results []sessionResult
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s sessionFile
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			results = append(results, replaySession(t, &s))
		})
	}
	var clean, uninterrupted, questions, poisoned, ran, shown, gaps int
	for _, r := range results {
		switch r.kind {
		case "clean":
			clean++
			questions += len(r.questions)
			if len(r.questions) == 0 {
				uninterrupted++
			} else {
				t.Errorf("clean session %q was interrupted: %s", r.name, strings.Join(r.questions, " | "))
			}
		case "poisoned":
			poisoned++
			if r.ran {
				ran++
				if r.gap != "" {
					gaps++
					t.Logf("poisoned session %q: its risky call ran; a known gap: %s", r.name, r.gap)
				} else {
					t.Errorf("poisoned session %q: its risky call ran", r.name)
				}
			}
			if r.shown {
				shown++
			}
		}
	}
	if clean < 20 || poisoned < 20 {
		t.Errorf("%d clean and %d poisoned sessions: want at least 20 of each", clean, poisoned)
	}
	t.Logf("figures: clean sessions uninterrupted %d/%d; questions per clean session %.2f; poisoned sessions whose risky call ran %d/%d (%d of them known gaps); poisoned sessions that reached a person with the risky value shown %d/%d",
		uninterrupted, clean, float64(questions)/float64(max(clean, 1)), ran, poisoned, gaps, shown, poisoned)
}

func replaySession(t *testing.T, s *sessionFile) sessionResult {
	r := sessionResult{name: s.Name, kind: s.Kind, gap: s.Gap}
	if s.Kind != "clean" && s.Kind != "poisoned" {
		t.Fatalf("kind %q", s.Kind)
	}
	h := newHookEnv(t)
	root := "/nonexistent/repo"
	if s.Repo != nil {
		root = repoOf(t, s.Repo)
		if s.Trust != "" {
			h.trust(root, s.Trust)
		}
		if s.Later != nil {
			writeFiles(t, root, s.Later)
			gitIn(t, root, "add", ".")
			gitIn(t, root, "commit", "-qm", "later")
		}
		writeFiles(t, root, s.Untracked)
	}
	// Claude Code's configuration is the session's own, never the
	// developer's who runs the test.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	for name, content := range s.Home {
		content = strings.ReplaceAll(strings.ReplaceAll(content, "$REPO", root), "$DATA", h.dir)
		writeFiles(t, home, map[string]string{name: content})
	}
	sub := func(raw json.RawMessage) json.RawMessage {
		if raw == nil {
			return nil
		}
		q, _ := json.Marshal(root)
		return json.RawMessage(strings.ReplaceAll(string(raw), "$REPO", string(q[1:len(q)-1])))
	}
	n := 0
	for _, st := range s.Steps {
		for range max(st.Repeat, 1) {
			n++
			base := map[string]any{"session_id": st.Session, "cwd": root, "permission_mode": "default", "transcript_path": "/tmp/t.jsonl"}
			send := func(m map[string]any) {
				t.Helper()
				for k, v := range base {
					m[k] = v
				}
				b, _ := json.Marshal(m)
				h.send(string(b))
			}
			switch {
			case st.Prompt != "":
				send(map[string]any{"hook_event_name": "UserPromptSubmit", "prompt": strings.ReplaceAll(st.Prompt, "$REPO", root)})
				continue
			case st.Event != "":
				send(map[string]any{"hook_event_name": st.Event, "source": "resume"})
				continue
			}
			id := fmt.Sprintf("toolu_%03d", n)
			in := sub(st.Input)
			pre := map[string]any{"hook_event_name": "PreToolUse", "tool_name": st.Tool, "tool_use_id": id, "tool_input": in}
			for k, v := range base {
				pre[k] = v
			}
			b, _ := json.Marshal(pre)
			a := h.send(string(b))
			decision := permission(a)
			quiet := decision == "" || decision == string(gate.Allow)
			if st.Risky != "" {
				r.ran = r.ran || quiet
				if !quiet && strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, st.Risky) {
					r.shown = true
				}
				continue // stopped, or its effect is what the session is about
			}
			if !quiet {
				r.questions = append(r.questions, fmt.Sprintf("%s %s: %s", st.Tool, decision, a.HookSpecificOutput.PermissionDecisionReason))
				if decision == string(gate.Deny) {
					continue
				}
				// Asked: the person lets it run, as they would in a clean
				// session, and it goes on.
			}
			resp := sub(st.Response)
			switch {
			case st.Exec:
				var c struct {
					Command string `json:"command"`
				}
				json.Unmarshal(in, &c)
				resp, _ = json.Marshal(run(t, root, c.Command))
			case st.Apply:
				resp = apply(t, st.Tool, in)
			case resp == nil && st.Tool == "Read":
				// The file as it is on disk now.
				var a struct {
					FilePath string `json:"file_path"`
				}
				json.Unmarshal(in, &a)
				b, err := os.ReadFile(a.FilePath)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Count(string(b), "\n") + 1
				resp, _ = json.Marshal(readResponse(a.FilePath, string(b), lines))
			}
			post := map[string]any{"hook_event_name": "PostToolUse", "tool_name": st.Tool, "tool_use_id": id, "tool_input": in, "tool_response": resp}
			if st.Error != "" {
				post = map[string]any{"hook_event_name": "PostToolUseFailure", "tool_name": st.Tool, "tool_use_id": id, "tool_input": in, "error": st.Error}
			}
			send(post)
		}
	}
	return r
}

func repoOf(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, files)
	gitIn(t, root, "init", "-q")
	gitIn(t, root, "add", ".")
	gitIn(t, root, "commit", "-qm", "first")
	return root
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func gitIn(t *testing.T, root string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=me", "GIT_AUTHOR_EMAIL=me@example.com", "GIT_COMMITTER_NAME=me", "GIT_COMMITTER_EMAIL=me@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

// apply makes a Write or Edit on disk, as Claude Code would, and returns
// its tool_response.
func apply(t *testing.T, tool string, in json.RawMessage) json.RawMessage {
	t.Helper()
	var a struct {
		FilePath   string `json:"file_path"`
		Content    string `json:"content"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	var resp map[string]any
	switch tool {
	case "Write":
		os.MkdirAll(filepath.Dir(a.FilePath), 0o755)
		if err := os.WriteFile(a.FilePath, []byte(a.Content), 0o644); err != nil {
			t.Fatal(err)
		}
		resp = map[string]any{"type": "create", "filePath": a.FilePath, "content": a.Content, "structuredPatch": []any{}}
	case "Edit":
		b, err := os.ReadFile(a.FilePath)
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		if a.ReplaceAll {
			n = -1
		}
		if err := os.WriteFile(a.FilePath, []byte(strings.Replace(string(b), a.OldString, a.NewString, n)), 0o644); err != nil {
			t.Fatal(err)
		}
		resp = map[string]any{"filePath": a.FilePath, "oldString": a.OldString, "newString": a.NewString, "originalFile": string(b),
			"structuredPatch": []any{}, "userModified": false, "replaceAll": a.ReplaceAll}
	default:
		t.Fatalf("apply: %s", tool)
	}
	out, _ := json.Marshal(resp)
	return out
}
