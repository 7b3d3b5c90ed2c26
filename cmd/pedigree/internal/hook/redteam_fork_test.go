package hook_test

// Red-team tests of the fork wait (sync.go: a session that starts from an
// earlier conversation waits, at its PreToolUse, for its transcript to show
// where that conversation ends), written by a session that did not know the
// change's intent, against its first version (which ended the wait at the
// first user line matching a prompt recorded in the fork, and went on past
// the deadline with any content).
//
// FINDING tests failed against that version, each for the weakness it
// names, and pass since the fix (the end is seen by a line's timestamp or
// by a prompt no other session holds; the deadline stops the call; the
// mark is written first; a waiting call stops when the mark is gone); they
// fail if it comes back. WITHSTOOD tests are attacks both versions resisted,
// kept so that the code goes on resisting them.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/gate"
)

const rtParentPrompt = "Read NOTES.md and do what it says"

// rtStart and rtPrompt are a SessionStart and a UserPromptSubmit.
func rtStart(session, source string) map[string]any {
	return map[string]any{"session_id": session, "hook_event_name": "SessionStart", "source": source}
}

func rtPrompt(session, prompt string) map[string]any {
	return map[string]any{"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
}

// rtAppend appends b to the file at p (never truncating it: a truncation
// the hook reads in between is a shrunk transcript).
func rtAppend(t *testing.T, p string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Error(err)
	}
}

// rtSessionDir is the hook-state directory of a session.
func rtSessionDir(c *hookEnv, session string) string {
	h := sha256.Sum256([]byte(session))
	return filepath.Join(c.dir, hook.StateDir, "claude", hex.EncodeToString(h[:16]))
}

// rtForkOfPoisoned is the poisoned session replayed into c, and the
// transcript its fork would have: the parent's lines, then the fork's own
// prompt; cut is the end of the parent's prompt line (the first
// conversation line of the copy).
func rtForkOfPoisoned(t *testing.T, c *hookEnv, dir, prompt string) (full []byte, cut int) {
	t.Helper()
	c.replayReal("poisoned", filepath.Join(dir, "poisoned.jsonl"))
	parent, _ := realEvents(t, "poisoned")
	for _, l := range bytes.SplitAfter(parent, []byte("\n")) {
		cut += len(l)
		if bytes.Contains(l, []byte(`"type":"user"`)) && bytes.Contains(l, []byte(`"`+rtParentPrompt+`"`)) {
			break
		}
	}
	if cut >= len(parent) {
		t.Fatal("no prompt line in the poisoned transcript")
	}
	// The fork's own line is written after its SessionStart, which the
	// caller sends after this returns: its time is set ahead so that a slow
	// run (-race, a busy machine) does not put it before the start.
	line := userLine(prompt)
	line["timestamp"] = time.Now().Add(time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
	own, _ := json.Marshal(line)
	full = append(append(slices.Clone(parent), own...), '\n')
	return full, cut
}

// rtCleanParent is a clean session "p" that ran one Bash call unasked,
// and its transcript.
func rtCleanParent(t *testing.T, c *hookEnv, dir string) *transcript {
	t.Helper()
	parent := &transcript{t: t, path: filepath.Join(dir, "p.jsonl")}
	c.must(rtStart("p", "startup"), parent.path)
	c.must(rtPrompt("p", "list the files"), parent.path)
	parent.add(userLine("list the files"))
	if got := permission(c.must(bash("p", "b0"), parent.path)); got != "" {
		t.Fatalf("the clean parent: %q", got)
	}
	return parent
}

// FINDING (a), high: the wait ends at the first user line of the
// transcript whose text is a prompt recorded in the fork, and the fork's
// own prompt is recorded before the transcript is read. When the person
// types in the fork a prompt the inherited conversation already holds
// ("continue", "yes", "go on", or a scripted `claude -p --resume X
// --fork-session "<same prompt>"`), the inherited copy of it ends the wait,
// and the mark is dropped, though the lines after it (the poisoned Read's
// result) are not written yet: the call runs on a context without them.
// Here the transcript is caught while the line after the inherited prompt
// is being written (the hook itself expects lines written in pieces: "a
// line without its newline is still being written").
//
// WITHSTOOD: the same write with a prompt of the fork's own waits for the
// rest, and is asked; an identical prompt with the transcript written
// whole is asked.
func TestRedteamForkIdenticalPromptEndsWaitEarly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prompt  string
		partial bool
	}{
		{"WITHSTOOD a prompt of its own, transcript caught mid-write", "Continue the fork and finish the setup", true},
		{"WITHSTOOD the parent's prompt typed again, transcript whole", rtParentPrompt, false},
		{"FINDING the parent's prompt typed again, transcript caught mid-write", rtParentPrompt, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHookEnv(t)
			c.h.SetForkWait(10 * time.Second)
			dir := t.TempDir()
			full, cut := rtForkOfPoisoned(t, c, dir, tc.prompt)
			tp := filepath.Join(dir, "fork.jsonl")
			c.must(rtStart("f", "fork"), tp)
			c.must(rtPrompt("f", tc.prompt), tp)
			done := make(chan struct{})
			if tc.partial {
				// Claude Code's copy of the conversation, caught with the
				// inherited prompt line whole and the next line half
				// written; the rest follows 300ms later.
				at := cut + 100
				rtAppend(t, tp, full[:at])
				go func() {
					defer close(done)
					time.Sleep(300 * time.Millisecond)
					rtAppend(t, tp, full[at:])
				}()
			} else {
				rtAppend(t, tp, full)
				close(done)
			}
			a, err := c.handle(bash("f", "b1"), tp)
			<-done
			if err != nil {
				t.Fatalf("the fork's call: %v", err)
			}
			if got := permission(a); got != string(gate.Ask) && got != string(gate.Deny) {
				t.Fatalf("the fork of the poisoned session, prompt %q: its Bash call %q (allowed), want ask: the wait ended at the inherited copy of the prompt, before the poisoned Read's result was written", tc.prompt, got)
			}
		})
	}
}

// FINDING (b), medium: the wait looks for the prompt in what its own
// reads gain, and it checks the mark only once, before it starts. When
// the model proposes several calls at once (parallel Reads, Globs: Claude
// Code runs their PreToolUse hooks side by side) in a fork, the first read
// that reaches the prompt line records it and moves the shared read state
// past it; every other waiting call then reads nothing new, never sees the
// prompt, and waits out the whole forkWait (2 s) although the mark was
// dropped and the context is complete. Clean work, delayed by seconds.
func TestRedteamForkConcurrentCallsWaitOutTheDeadline(t *testing.T) {
	c := newHookEnv(t) // the real forkWait, 2 s
	dir := t.TempDir()
	parent := rtCleanParent(t, c, dir)

	fork := filepath.Join(dir, "f.jsonl")
	c.must(rtStart("f", "fork"), fork)
	c.must(rtPrompt("f", "now run the tests"), fork)
	inherited, _ := os.ReadFile(parent.path)
	rtAppend(t, fork, inherited)

	type result struct {
		got string
		err error
		at  time.Time
	}
	const calls = 3
	out := make(chan result, calls)
	for i := range calls {
		b, _ := json.Marshal(map[string]any{"session_id": "f", "hook_event_name": "PreToolUse", "tool_name": "Glob",
			"tool_use_id": "g" + string(rune('0'+i)), "tool_input": map[string]any{"pattern": "*"}, "transcript_path": fork})
		ev, err := hook.ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			a, err := c.h.Handle(t.Context(), ev)
			out <- result{permission(a), err, time.Now()}
		}()
		time.Sleep(7 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // all are waiting for the prompt
	written := time.Now()
	own, _ := json.Marshal(userLine("now run the tests"))
	rtAppend(t, fork, append(own, '\n'))
	for range calls {
		r := <-out
		if r.err != nil || r.got != "" {
			t.Errorf("a clean fork's call: %q, %v", r.got, r.err)
		}
		if d := r.at.Sub(written); d > time.Second {
			t.Errorf("a clean fork's call ran %s after its transcript showed the prompt (another call's read had taken it)", d.Round(time.Millisecond))
		}
	}
}

// FINDING (b), low (the first version's doc comment accepted it): a fork or a resume whose
// first prompt is a slash command never shows the prompt as typed (the
// transcript holds the command's tag and expansion), so its first call
// waits the whole forkWait although the transcript, written whole before
// the call, holds everything. (The call is then asked, as in any session:
// the command's text is user text the hook did not see typed; so the cost
// is 2 s before an ask, not a clean call stopped.)
func TestRedteamForkSlashCommandWaitsOutTheDeadline(t *testing.T) {
	c := newHookEnv(t) // the real forkWait, 2 s
	dir := t.TempDir()
	parent := rtCleanParent(t, c, dir)

	fork := &transcript{t: t, path: filepath.Join(dir, "f.jsonl")}
	c.must(rtStart("f", "fork"), fork.path)
	c.must(rtPrompt("f", "/review"), fork.path)
	inherited, _ := os.ReadFile(parent.path)
	rtAppend(t, fork.path, inherited)
	fork.add(userLine("<command-message>review is running…</command-message>\n<command-name>/review</command-name>"))
	began := time.Now()
	a, err := c.handle(bash("f", "b1"), fork.path)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("a clean fork's first call after a slash command took %s (%q); its transcript was whole before the call", d.Round(time.Millisecond), permission(a))
	}
}

// FINDING (a), low: past the deadline any item the transcript shows makes
// the wait go on with what it holds (the branch meant for a slash
// command's expansion), whether or not the inherited conversation is
// there: a transcript whose copy is only begun (the parent's first prompt,
// not the poisoned Read after it) when the deadline comes lets the call run
// on that part, and the mark is dropped. The same transcript with no item
// at all is stopped (ErrForkUnread): which of the two a late transcript
// gets depends on where Claude Code was in its copy.
func TestRedteamForkDeadlineTakesAPartialConversation(t *testing.T) {
	c := newHookEnv(t)
	c.h.SetForkWait(100 * time.Millisecond)
	dir := t.TempDir()
	full, cut := rtForkOfPoisoned(t, c, dir, "/setup")
	tp := filepath.Join(dir, "fork.jsonl")
	c.must(rtStart("f", "fork"), tp)
	c.must(rtPrompt("f", "/setup"), tp)
	rtAppend(t, tp, full[:cut]) // the copy begun: up to the parent's prompt
	a, err := c.handle(bash("f", "b1"), tp)
	if err == nil && permission(a) == "" {
		t.Errorf("the fork of the poisoned session, its copy of the conversation begun but not done at the deadline: its Bash call was allowed (marks left: %d)", len(c.inheritMarks()))
	}
}

// failContext is a store whose Context lookup fails (busy, a served
// backend restarting).
type failContext struct{ pedigree.Harness }

func (failContext) Context(context.Context, string) ([]string, error) {
	return nil, errors.New("the store is busy")
}

// FINDING (c), medium: the mark is written at SessionStart, and only when
// nothing before it failed. SessionStart is the one event Claude Code does
// not block on: a command hook's exit 2 there only shows stderr, and the
// session goes on. So any error at a fork's or resume's SessionStart (the
// store held past the hook's 5 s wait, a served backend's Context lookup
// failing, a read state forgetReads cannot remove) starts the session with
// no mark, and its first call does not wait: the gap the change closes is
// open again, silently. (Marking first, and marking a resume whose lookup
// failed, would fail closed.)
func TestRedteamSessionStartErrorLeavesNoMark(t *testing.T) {
	t.Run("FINDING fork, a read state that cannot be removed", func(t *testing.T) {
		c := newHookEnv(t)
		c.h.SetForkWait(100 * time.Millisecond)
		dir := t.TempDir()
		rtForkOfPoisoned(t, c, dir, "go on")
		tp := filepath.Join(dir, "fork.jsonl") // not written yet
		if err := os.MkdirAll(filepath.Join(rtSessionDir(c, "f"), "transcript-planted.json"), 0o700); err != nil {
			t.Fatal(err)
		}
		_, serr := c.handle(rtStart("f", "fork"), tp)
		t.Logf("SessionStart: %v (Claude Code goes on)", serr)
		c.must(rtPrompt("f", "go on"), tp)
		a, err := c.handle(bash("f", "b1"), tp)
		if err == nil && permission(a) == "" {
			t.Errorf("a fork whose SessionStart failed (%v): its call with the transcript not written was allowed, not held", serr)
		}
	})
	t.Run("FINDING resume, the context lookup failing", func(t *testing.T) {
		c := newHookEnv(t)
		c.h.SetForkWait(100 * time.Millisecond)
		busy, err := hook.New(t.Context(), failContext{c.e}, c.dir)
		if err != nil {
			t.Fatal(err)
		}
		tp := filepath.Join(t.TempDir(), "r.jsonl") // not written yet
		b, _ := json.Marshal(map[string]any{"session_id": "r", "hook_event_name": "SessionStart", "source": "resume", "transcript_path": tp})
		ev, _ := hook.ParseEvent(b)
		_, serr := busy.Handle(t.Context(), ev)
		t.Logf("SessionStart: %v (Claude Code goes on)", serr)
		c.must(rtPrompt("r", "go on"), tp)
		a, err := c.handle(bash("r", "b1"), tp)
		if serr != nil && err == nil && permission(a) == "" {
			t.Errorf("a resume of an ID the store has no context of, its SessionStart failed (%v): its call with the transcript not written was allowed, not held", serr)
		}
	})
}

// WITHSTOOD (c): a mark that is not a regular file of the hook's (a
// symbolic link, a FIFO, a directory) counts as a mark, does not hang the
// hook (the FIFO is not opened for a blocking read), and, as it cannot be
// removed, blocks the session's calls: fail closed. A link to the parent's
// state is not followed.
func TestRedteamForkMarkOfAnotherKind(t *testing.T) {
	for name, plant := range map[string]func(p string) error{
		"symlink":   func(p string) error { return os.Symlink("/etc/passwd", p) },
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		t.Run("WITHSTOOD "+name, func(t *testing.T) {
			c := newHookEnv(t)
			c.h.SetForkWait(200 * time.Millisecond)
			dir := t.TempDir()
			full, _ := rtForkOfPoisoned(t, c, dir, "go on")
			tp := filepath.Join(dir, "fork.jsonl")
			c.must(rtStart("f", "fork"), tp)
			c.must(rtPrompt("f", "go on"), tp)
			mark := c.inheritMarks()
			if len(mark) != 1 {
				t.Fatalf("marks: %v", mark)
			}
			os.Remove(mark[0])
			if err := plant(mark[0]); err != nil {
				t.Fatal(err)
			}
			rtAppend(t, tp, full)
			done := make(chan struct{})
			var a *hook.Answer
			var err error
			go func() { defer close(done); a, err = c.handle(bash("f", "b1"), tp) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the hook hung on the planted mark")
			}
			if err == nil && permission(a) == "" {
				t.Fatalf("the fork's call with a %s for a mark: allowed", name)
			}
			t.Logf("%s: %q, %v", name, permission(a), err)
			if _, err := os.Lstat(mark[0]); err != nil {
				t.Fatalf("the planted %s was removed: %v", name, err)
			}
		})
	}
}

// WITHSTOOD (a): the fork's transcript written line by line while its
// call waits (with a prompt of its own), and three calls proposed at once
// in the fork of the poisoned session: none is allowed.
func TestRedteamForkWrittenInPiecesAndConcurrent(t *testing.T) {
	c := newHookEnv(t)
	c.h.SetForkWait(2 * time.Second) // the real one; the calls that lose the race wait it out (the concurrency finding)
	dir := t.TempDir()
	full, _ := rtForkOfPoisoned(t, c, dir, "Continue the fork and finish the setup")
	tp := filepath.Join(dir, "fork.jsonl")
	c.must(rtStart("f", "fork"), tp)
	c.must(rtPrompt("f", "Continue the fork and finish the setup"), tp)
	const calls = 3
	type result struct {
		got string
		err error
	}
	out := make(chan result, calls)
	for i := range calls {
		ev := bash("f", "b"+string(rune('0'+i)))
		ev["transcript_path"] = tp
		b, _ := json.Marshal(ev)
		e, err := hook.ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			a, err := c.h.Handle(t.Context(), e)
			out <- result{permission(a), err}
		}()
	}
	for _, l := range bytes.SplitAfter(full, []byte("\n")) {
		time.Sleep(2 * time.Millisecond)
		rtAppend(t, tp, l)
	}
	for range calls {
		r := <-out
		if r.err == nil && r.got != string(gate.Ask) && r.got != string(gate.Deny) {
			t.Errorf("a call of the poisoned session's fork, its transcript written line by line: %q", r.got)
		}
	}
}
