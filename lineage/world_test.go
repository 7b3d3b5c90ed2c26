package lineage_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// world is a graph over an in-memory store with a frozen registry of the
// usual cast, written the way the engine writes it (Prepare, then Write in a
// commit, then Committed), without the engine: the graph's own rules, tested
// where they live. On cleanup the store must still verify, unless the test
// tampered with it.
type world struct {
	t     *testing.T
	db    *store.DB
	reg   *registry.Registry
	g     *lineage.Graph
	keys  map[string]*registry.Signer
	seq   uint64
	clock time.Time
	// tampered turns off the cleanup check.
	tampered bool
}

// start is the world clock's first instant.
var start = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var cast = []registry.Principal{
	{ID: "user:alice", Tier: registry.User, Approver: true},
	{ID: "agent:planner", Tier: registry.Internal},
	{ID: "tool:gmail_read", Tier: registry.External},
	{ID: "tool:web_fetch", Tier: registry.Unverified},
	{ID: "tool:calculator", Tier: registry.Internal},
	{ID: "user:mallory", Tier: registry.User},
}

// strong gives every parent weight 1.
func strong(ids ...string) []lineage.Parent {
	out := []lineage.Parent{}
	for _, id := range ids {
		out = append(out, lineage.Parent{ID: id, Weight: 1})
	}
	return out
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	db, err := store.Create("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, db: db, keys: map[string]*registry.Signer{}, clock: start}
	op, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.Bootstrap(ctx, db.Space(store.Registry), 0.5, op.Public().(ed25519.PublicKey), w.clock); err != nil {
		t.Fatal(err)
	}
	if w.reg, err = registry.Load(db.Space(store.Registry)); err != nil {
		t.Fatal(err)
	}
	for _, p := range cast {
		s, _, err := registry.GenerateSigner(nil)
		if err != nil {
			t.Fatal(err)
		}
		w.keys[p.ID] = s
		p.PublicKey = s.Public()
		if err := w.reg.Add(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.reg.Freeze(ctx, op, w.clock); err != nil {
		t.Fatal(err)
	}
	w.g = lineage.New(w.space(), w.reg, nil)
	t.Cleanup(func() {
		if !w.tampered {
			if r := w.verify(); !r.OK() {
				t.Errorf("verify on cleanup found problems: %+v", r.Problems)
			}
		}
		db.Close()
	})
	return w
}

func (w *world) space() kv.Store { return w.db.Space(store.Lineage) }

// fresh is a graph over the same store with an empty node cache: what a
// restarted engine reads.
func (w *world) fresh() *lineage.Graph { return lineage.New(w.space(), w.reg, nil) }

// statement is a memory entry of principal in session with content and
// parents, at the next tick of the world's clock.
func (w *world) statement(principal, session, content string, parents []lineage.Parent) *lineage.Statement {
	w.clock = w.clock.Add(time.Millisecond)
	return &lineage.Statement{Version: 1, Principal: principal, Kind: lineage.KindMemory, Session: session,
		ContentDigest: lineage.DigestContent([]byte(content)), Parents: parents, Time: lineage.FormatTime(w.clock)}
}

// record signs and stores a memory entry and fails the test on error.
func (w *world) record(principal, session, content string, parents []lineage.Parent) *lineage.Node {
	w.t.Helper()
	n, err := w.store(w.statement(principal, session, content, parents), []byte(content))
	if err != nil {
		w.t.Fatalf("record %s: %v", principal, err)
	}
	return n
}

// call signs and stores a call entry of principal to tool with canonical
// args, derived from parents.
func (w *world) call(principal, session, tool, args string, parents []lineage.Parent) *lineage.Node {
	w.t.Helper()
	st := w.statement(principal, session, "", parents)
	st.Kind, st.Tool, st.Args = lineage.KindCall, tool, []byte(args)
	n, err := w.store(st, nil)
	if err != nil {
		w.t.Fatalf("call %s: %v", tool, err)
	}
	return n
}

// context is session's context as strong parents: what the engine gives
// an agent's entry that names no parents.
func (w *world) context(session string) []lineage.Parent {
	w.t.Helper()
	ids, err := w.g.Context(w.t.Context(), session)
	if err != nil {
		w.t.Fatal(err)
	}
	return strong(ids...)
}

// store signs st with its principal's key and stores it with content
// through the envelope path (Prepare).
func (w *world) store(st *lineage.Statement, content []byte) (*lineage.Node, error) {
	env, _, err := lineage.Sign(w.keys[st.Principal], st)
	if err != nil {
		return nil, err
	}
	return w.insert(env, content)
}

// insert stores a signed envelope as the engine does: prepared, written
// with the next sequence unless it is stored already, then committed.
func (w *world) insert(env, content []byte) (*lineage.Node, error) {
	p, err := w.g.Prepare(w.t.Context(), env, content)
	if err != nil {
		return nil, err
	}
	return w.write(p)
}

func (w *world) write(p *lineage.Pending) (*lineage.Node, error) {
	var existing *lineage.Node
	err := w.space().Commit(w.t.Context(), p.Size(), func(t kv.Txn) error {
		var err error
		if existing, err = p.Stored(t); err != nil || existing != nil {
			return err
		}
		return p.Write(t, w.seq+1)
	})
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return existing, nil
	}
	w.seq++
	p.Committed()
	return p.Node, nil
}

// recall puts ids into session's context, as the engine's recall does.
func (w *world) recall(session string, ids ...string) error {
	w.clock = w.clock.Add(time.Millisecond)
	r := &lineage.Recall{Session: session, IDs: ids, Time: lineage.FormatTime(w.clock)}
	err := w.space().Commit(w.t.Context(), 0, func(t kv.Txn) error {
		if ok, err := w.g.RecallStored(t, r); err != nil || ok {
			return err
		}
		return w.g.RecordRecall(t, r)
	})
	return err
}

// tamper changes the graph's rows behind its back; the cleanup check is off.
func (w *world) tamper(fn func(t kv.Txn) error) {
	w.t.Helper()
	w.tampered = true
	if err := w.space().Commit(w.t.Context(), 0, fn); err != nil {
		w.t.Fatal(err)
	}
}

// verify runs VerifyIn over the store and returns what it found.
func (w *world) verify() *lineage.Report {
	w.t.Helper()
	r := &lineage.Report{}
	err := w.space().View(func(t kv.Txn) error {
		v, err := w.fresh().VerifyIn(context.Background(), t, func(id, f string, a ...any) {
			r.Problems = append(r.Problems, lineage.Problem{ID: id, What: fmt.Sprintf(f, a...)})
		})
		if v != nil {
			r.Entries = len(v.Entries)
		}
		return err
	})
	if err != nil {
		w.t.Fatalf("verify: %v", err)
	}
	return r
}
