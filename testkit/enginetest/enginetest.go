package enginetest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Clock is a settable clock that moves a millisecond on each reading.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

// Now returns the time and advances it by a millisecond.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// World is an engine with principals.
type World struct {
	T        testing.TB
	E        *pedigree.Engine
	Keys     map[string]*registry.Signer
	Operator *registry.Signer
	Clock    *Clock
	// SkipVerify turns off the cleanup check, for tests that tamper.
	SkipVerify bool
	// Dir is the data directory of an on-disk world, and OperatorKeyFile
	// its operator key (outside Dir; its trust root is beside it).
	Dir             string
	OperatorKeyFile string
	opts            []pedigree.Option
}

// P is a principal to register.
type P struct {
	ID   string
	Tier registry.Tier
	// Approver gives the principal approval authority (user tier only).
	Approver bool
}

// Cast turns principals (their keys are ignored) into a cast.
func Cast(ps []registry.Principal) []P {
	out := make([]P, len(ps))
	for i, p := range ps {
		out[i] = P{ID: p.ID, Tier: p.Tier, Approver: p.Approver}
	}
	return out
}

// Default is the cast most tests need.
var Default = []P{
	{"user:alice", registry.User, true},
	{"agent:planner", registry.Internal, false},
	{"tool:gmail_read", registry.External, false},
	{"tool:web_fetch", registry.Unverified, false},
	{"tool:calculator", registry.Internal, false},
	{"user:mallory", registry.User, false},
}

// New makes a frozen in-memory world with τ = 0.5.
func New(t testing.TB, ps []P, opts ...pedigree.Option) *World {
	t.Helper()
	op, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &World{T: t, Keys: map[string]*registry.Signer{}, Operator: op, Clock: NewClock()}
	opts = append([]pedigree.Option{pedigree.WithClock(w.Clock.Now)}, opts...)
	ctx := context.Background()
	e, err := pedigree.NewInMemory(ctx, 0.5, op, opts...)
	if err != nil {
		t.Fatal(err)
	}
	w.E = e
	w.bootstrap(ps)
	t.Cleanup(func() {
		if !w.SkipVerify {
			r, err := e.Verify(context.Background())
			if err != nil {
				t.Errorf("verify on cleanup: %v", err)
			} else if !r.OK() {
				t.Errorf("verify on cleanup found problems: %+v", r.Problems)
			}
		}
		e.Close()
	})
	return w
}

// bootstrap registers ps with new keys and freezes the registry.
func (w *World) bootstrap(ps []P) {
	w.T.Helper()
	ctx := context.Background()
	for _, p := range ps {
		s, _, err := registry.GenerateSigner(nil)
		if err != nil {
			w.T.Fatal(err)
		}
		w.Keys[p.ID] = s
		if err := w.E.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: p.ID, Tier: p.Tier, PublicKey: s.Public(), Approver: p.Approver}); err != nil {
			w.T.Fatal(err)
		}
	}
	if err := w.E.Bootstrap().Freeze(ctx, w.Operator); err != nil {
		w.T.Fatal(err)
	}
}

// Record records content as principal in session with explicit parents
// (nil parents: the engine's default) and fails the test on error.
func (w *World) Record(principal, session, content string, parents []lineage.Parent) *lineage.Node {
	w.T.Helper()
	n, err := w.TryRecord(principal, session, content, parents)
	if err != nil {
		w.T.Fatalf("record %s: %v", principal, err)
	}
	return n
}

// TryRecord is Record without failing the test.
func (w *World) TryRecord(principal, session, content string, parents []lineage.Parent) (*lineage.Node, error) {
	return w.E.Record(context.Background(), w.Keys[principal], pedigree.Entry{
		Principal: principal, Kind: lineage.KindMemory, Session: session, Content: []byte(content), Parents: parents,
	})
}

// Strong and Weak make parent lists.
func Strong(ids ...string) []lineage.Parent { return weighted(1, ids) }

// Weak gives every parent weight 0.1.
func Weak(ids ...string) []lineage.Parent { return weighted(0.1, ids) }

func weighted(w float64, ids []string) []lineage.Parent {
	out := []lineage.Parent{}
	for _, id := range ids {
		out = append(out, lineage.Parent{ID: id, Weight: w})
	}
	return out
}

// Check asks the gate, as principal, and fails the test on error.
func (w *World) Check(principal string, c pedigree.Call) *gate.Decision {
	w.T.Helper()
	c.Principal = principal
	d, err := w.E.Check(context.Background(), w.Keys[principal], c)
	if err != nil {
		w.T.Fatalf("check %s: %v", c.Tool, err)
	}
	return d
}

// TryCheck checks a call as principal and returns the error too.
func (w *World) TryCheck(principal string, c pedigree.Call) (*gate.Decision, error) {
	c.Principal = principal
	return w.E.Check(context.Background(), w.Keys[principal], c)
}

// Crash closes the engine as a killed process would leave it: without the
// checkpoint it hands its witnesses at close.
func (w *World) Crash() {
	w.T.Helper()
	if err := hatch.Abandon(w.E); err != nil {
		w.T.Fatal(err)
	}
	w.E = nil
}

// NewOnDisk is New on a data directory in t.TempDir(), made with Init, so
// that tests can close the engine, change the store behind its back
// (Tamper) and reopen it.
func NewOnDisk(t testing.TB, ps []P, opts ...pedigree.Option) *World {
	t.Helper()
	dir := t.TempDir()
	w := &World{T: t, Keys: map[string]*registry.Signer{}, Clock: NewClock(), Dir: dir, opts: opts}
	ctx := context.Background()
	// The operator key is kept outside the data directory, as init does.
	w.OperatorKeyFile = filepath.Join(t.TempDir(), "operator.key")
	e, err := pedigree.Init(ctx, dir, 0.5, append(w.options(), pedigree.WithOperatorKeyFile(w.OperatorKeyFile))...)
	if err != nil {
		t.Fatal(err)
	}
	w.E = e
	if w.Operator, err = registry.LoadSigner(w.OperatorKeyFile); err != nil {
		t.Fatal(err)
	}
	w.bootstrap(ps)
	t.Cleanup(func() {
		if w.E != nil {
			w.E.Close()
		}
	})
	return w
}

func (w *World) options() []pedigree.Option {
	return append([]pedigree.Option{pedigree.WithClock(w.Clock.Now)}, w.opts...)
}

// Reopen closes the engine and opens the data directory again.
func (w *World) Reopen() error {
	w.T.Helper()
	if w.E != nil {
		w.E.Close()
		w.E = nil
	}
	e, err := pedigree.Open(context.Background(), w.Dir, w.options()...)
	if err != nil {
		return err
	}
	w.E = e
	return nil
}

// Tamper closes the engine, runs fn on the raw store, and leaves the engine
// closed: call Reopen to see what the engine makes of it.
func (w *World) Tamper(fn func(t *store.Txn) error) {
	w.T.Helper()
	w.E.Close()
	w.E = nil
	db, err := store.Open(w.Dir, store.Options{})
	if err != nil {
		w.T.Fatal(err)
	}
	defer db.Close()
	if err := db.Commit(w.T.Context(), 0, fn); err != nil {
		w.T.Fatal(err)
	}
}

// RebuildRegistry is the attack of someone who can write the data directory
// but holds no key: it replaces the operator's public key row with one of
// its own, deletes the freeze, registers user:eve (user tier, an approver)
// and freezes again with the new key, and rewrites registry.freeze to
// match. Every stored entry still verifies: the principals' keys are
// untouched. It returns eve's key; the engine is left closed.
func (w *World) RebuildRegistry() *registry.Signer {
	w.T.Helper()
	if w.E != nil {
		w.E.Close()
		w.E = nil
	}
	forged, _, _ := registry.GenerateSigner(nil)
	eve, _, _ := registry.GenerateSigner(nil)
	pemBytes, _ := registry.MarshalPrincipalKey(forged.Public())
	db, err := store.Open(w.Dir, store.Options{})
	if err != nil {
		w.T.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			db.Close()
		}
	}()
	ctx := w.T.Context()
	err = db.Commit(ctx, 0, func(tx *store.Txn) error {
		t := tx.In(store.Registry)
		b, err := t.Get([]byte("meta"))
		if err != nil {
			return err
		}
		var meta map[string]any
		if err := json.Unmarshal(b, &meta); err != nil {
			return err
		}
		meta["operator_key"] = string(pemBytes)
		b, _ = json.Marshal(meta)
		if err := t.Set([]byte("meta"), b); err != nil {
			return err
		}
		return t.Delete([]byte("freeze"))
	})
	if err != nil {
		w.T.Fatal(err)
	}
	reg, err := registry.Load(db.Space(store.Registry))
	if err != nil {
		w.T.Fatal(err)
	}
	if err := reg.Add(ctx, registry.Principal{ID: "user:eve", Tier: registry.User, PublicKey: eve.Public(), Approver: true}); err != nil {
		w.T.Fatal(err)
	}
	if err := reg.Freeze(ctx, forged, time.Now()); err != nil {
		w.T.Fatal(err)
	}
	rec, err := reg.FreezeRecord()
	if err != nil {
		w.T.Fatal(err)
	}
	if err := safefile.WriteFile(w.Dir, pedigree.FreezeFile, rec, 0o444); err != nil {
		w.T.Fatal(err)
	}
	// ...and seals the directory's configuration again with that key.
	closed = true
	if err := db.Close(); err != nil {
		w.T.Fatal(err)
	}
	if err := pedigree.Seal(ctx, w.Dir, forged); err != nil {
		w.T.Fatal(err)
	}
	return eve
}
