package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// heldOutputs is the engine with its inserts (the gateway's tool outputs)
// held until release is closed, or failed with fail. It notes a check that
// runs while an insert is still held.
type heldOutputs struct {
	Backend
	release chan struct{}
	fail    error
	held    atomic.Int32
	early   atomic.Bool
}

func (h *heldOutputs) Insert(ctx context.Context, env, content []byte) (*lineage.Node, error) {
	if h.fail != nil {
		return nil, h.fail
	}
	h.held.Add(1)
	defer h.held.Add(-1)
	<-h.release
	return h.Backend.Insert(ctx, env, content)
}

func (h *heldOutputs) Check(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, error) {
	if h.held.Load() > 0 {
		h.early.Store(true)
	}
	return h.Backend.Check(ctx, s, c)
}

// A result goes back to the host while its output entry is committed, and
// a call the agent makes right after it is decided only once that entry is
// stored: the write after a poisoned read is denied for the read's output,
// even with that output's commit held back until the write is waiting.
func TestCheckAfterResultSeesItsOutput(t *testing.T) {
	w := newWorld(t, catalogDeny)
	hold, release := holdBack(t)
	h := &heldOutputs{Backend: w.E, release: hold}
	w.g.o.Backend = h
	waiting := make(chan struct{}, 1)
	w.g.waiting = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	c := w.connect(t, "2025-11-25", "")
	read := c.call("read_text_file", map[string]any{"path": filepath.Join(w.work, "poisoned.txt")})
	out := meta(t, read).OutputID
	if read.IsError || out == "" {
		t.Fatalf("read: %v %q %+v", read.IsError, text(read), meta(t, read))
	}
	// The result came back while its output's insert cannot finish (it
	// waits for release): it is committed while the result is returned.
	leak := filepath.Join(w.work, "out", "leak.txt")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := c.try("write_file", map[string]any{"path": leak, "content": "KEY"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-waiting // the write waits for the read's output
	release()
	res := <-done
	if h.early.Load() {
		t.Fatal("a check ran while the session's last output was not yet stored")
	}
	if res == nil || !res.IsError || exists(leak) {
		t.Fatalf("the write right after a poisoned read was not denied: %+v written=%v", res, exists(leak))
	}
	d := meta(t, res)
	if d.Decision != gate.Deny || !slices.ContainsFunc(d.Untrusted, func(u lineage.Source) bool { return u.ID == out }) {
		t.Fatalf("the denial does not name the read's output %s: %+v", short(out), d)
	}
}

// An output entry that fails to commit after its result went back refuses
// the rest of its session (a later call, even one the catalog says is not
// sensitive, is not forwarded), is logged, and leaves other sessions alone.
func TestLostOutputRefusesSession(t *testing.T) {
	w := newWorld(t, catalogDeny)
	logs := w.captureLogs()
	h := &heldOutputs{Backend: w.E, release: released(), fail: errors.New("no space left on device (test)")}
	w.g.o.Backend = h
	c := w.connect(t, "2025-11-25", "")
	w.readPoison(c)
	w.settle()
	h.fail = nil // the store works again: the session stays refused

	leak := filepath.Join(w.work, "out", "leak.txt")
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": leak, "content": "KEY"}},
		{"read_text_file", map[string]any{"path": filepath.Join(w.work, "poisoned.txt")}},
	} {
		res := c.call(call.tool, call.args)
		if !res.IsError || !strings.HasPrefix(text(res), "pedigree denied") || !strings.Contains(text(res), "could not be recorded") {
			t.Fatalf("%s after a lost output: isError=%v %q", call.tool, res.IsError, text(res))
		}
	}
	if exists(leak) {
		t.Fatal("a write was forwarded after the session's output was lost")
	}
	if !strings.Contains(logs.String(), "a tool output could not be recorded") || !strings.Contains(logs.String(), "no space left on device") {
		t.Fatalf("the lost output was not logged: %s", logs.String())
	}
	ok := filepath.Join(w.work, "out", "ok.txt")
	if res := w.connect(t, "2025-11-25", "").call("write_file", map[string]any{"path": ok, "content": "x"}); res.IsError || !exists(ok) {
		t.Fatalf("another session was refused: %q", text(res))
	}
}

// captureLogs sends the gateway's log to the buffer returned.
func (w *world) captureLogs() *bytes.Buffer {
	var logs bytes.Buffer
	w.g.o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	return &logs
}

// holdBack is a release channel that holds back until release is called
// (at the latest at the test's cleanup, before the gateway's Close, which
// waits for what is held).
func holdBack(t *testing.T) (chan struct{}, func()) {
	c := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(c) }) }
	t.Cleanup(release)
	return c, release
}

// released is a release channel that holds nothing back.
func released() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// heldCalls is the engine with the commit of a call that CheckEarly lets
// go on early held: every wait for it blocks until release is closed, then
// reports fail or the engine's own answer. waiters counts the waits
// blocked now (the session's own and forward's).
type heldCalls struct {
	*pedigree.Engine
	release chan struct{}
	fail    error
	waiters atomic.Int32
}

func (h *heldCalls) CheckEarly(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, func() error, error) {
	d, stored, err := h.Engine.CheckEarly(ctx, s, c)
	if err != nil || stored == nil {
		return d, stored, err
	}
	return d, func() error {
		h.waiters.Add(1)
		defer h.waiters.Add(-1)
		<-h.release
		if err := stored(); err != nil || h.fail == nil {
			return err
		}
		return h.fail
	}, nil
}

// waitFor polls until cond holds; it fails the test when it never does
// (a guard against a hang, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("never: " + what)
		}
	}
}

// A call the catalog says is not sensitive is forwarded while its record
// is committed, but its result goes back only once the call and its
// decision are stored: with that commit held, the upstream has answered
// and the host still has nothing; released, the result and its decision
// are there.
func TestEarlyResultWaitsForItsCall(t *testing.T) {
	w := newWorld(t, catalogDeny)
	hold, release := holdBack(t)
	h := &heldCalls{Engine: w.E, release: hold}
	w.g.o.Backend = h
	c := w.connect(t, "2025-11-25", "")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := c.try("read_text_file", map[string]any{"path": filepath.Join(w.work, "poisoned.txt")})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// Two waits: the session's (its next request waits for this record)
	// and forward's, which it starts only once the upstream has answered.
	waitFor(t, "forward waited for the call's record", func() bool { return h.waiters.Load() == 2 })
	select {
	case res := <-done:
		t.Fatalf("the result went back before its call was stored: %q", text(res))
	default:
	}
	release()
	res := <-done
	if res == nil || res.IsError || !strings.Contains(text(res), "SYSTEM NOTE") {
		t.Fatalf("read: %+v", res)
	}
	d := meta(t, res)
	got, err := w.E.Decision(context.Background(), d.DecisionID)
	if err != nil || got.Decision != gate.Allow || got.CallID != d.CallID {
		t.Fatalf("the early allow is not in the decision log: %+v %v", got, err)
	}
}

// A call forwarded early whose record then fails to commit has its result
// withheld: the host never holds content the engine has no record of. The
// session goes on: nothing unrecorded reached the host.
func TestEarlyCallNotRecordedWithholdsResult(t *testing.T) {
	w := newWorld(t, catalogDeny)
	logs := w.captureLogs()
	h := &heldCalls{Engine: w.E, release: released(), fail: errors.New("no space left on device (test)")}
	w.g.o.Backend = h
	c := w.connect(t, "2025-11-25", "")
	res := c.call("read_text_file", map[string]any{"path": filepath.Join(w.work, "poisoned.txt")})
	if !res.IsError || strings.Contains(text(res), "SYSTEM NOTE") || !strings.Contains(text(res), "could not be recorded, so its result is withheld") {
		t.Fatalf("a result whose call was not recorded went back: isError=%v %q", res.IsError, text(res))
	}
	if d := meta(t, res); d.Decision != gate.Deny || d.OutputID != "" {
		t.Fatalf("the withheld result's meta: %+v", d)
	}
	if !strings.Contains(logs.String(), "its result is withheld") || !strings.Contains(logs.String(), "no space left on device") {
		t.Fatalf("the lost call was not logged: %s", logs.String())
	}
	h.fail = nil
	ok := filepath.Join(w.work, "out", "ok.txt")
	if res := c.call("write_file", map[string]any{"path": ok, "content": "x"}); res.IsError || !exists(ok) {
		t.Fatalf("the session was refused after a withheld result: %q", text(res))
	}
}
