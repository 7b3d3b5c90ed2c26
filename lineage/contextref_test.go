package lineage_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// chainHex is the context chain over ids, computed here apart from the
// graph: c0 = 32 zero bytes, ck = sha256(ck-1 || idk).
func chainHex(ids []string) string {
	var c [32]byte
	for _, id := range ids {
		c = sha256.Sum256(append(c[:], id...))
	}
	return hex.EncodeToString(c[:])
}

// refCall is a call of principal in session naming the first n entries of
// ctx by reference, then listing extra.
func (w *world) refCall(principal, session string, ctx []string, n int, extra []lineage.Parent) *lineage.Statement {
	st := w.statement(principal, session, "", extra)
	st.Kind, st.Tool, st.Args = lineage.KindCall, "send", []byte(`{"to":"x"}`)
	st.Version, st.Context = 2, &lineage.ContextRef{N: n, Head: chainHex(ctx[:n])}
	return st
}

// listCall is the same call listing the first n entries of ctx, then extra.
func (w *world) listCall(principal, session string, ctx []string, n int, extra []lineage.Parent) *lineage.Statement {
	st := w.statement(principal, session, "", append(strong(ctx[:n]...), extra...))
	st.Kind, st.Tool, st.Args = lineage.KindCall, "send", []byte(`{"to":"x"}`)
	return st
}

func (w *world) prepare(g *lineage.Graph, st *lineage.Statement) (*lineage.Pending, error) {
	env, _, err := lineage.Sign(w.keys[st.Principal], st)
	if err != nil {
		w.t.Fatal(err)
	}
	return g.Prepare(w.t.Context(), env, nil)
}

// sameLabels compares what a call's node says of its ancestry, apart from
// its own ID, time and the form its parents take.
func sameLabels(a, b *lineage.Node) error {
	type labels struct {
		Tier, Effective, Reach                                registry.Tier
		EffectiveVia, EffectiveRoot, ReachVia, ReachRoot, Ses string
		NParents                                              int
	}
	la := labels{a.Tier, a.Effective, a.Reach, a.EffectiveVia, a.EffectiveRoot, a.ReachVia, a.ReachRoot, a.Session, a.NParents}
	lb := labels{b.Tier, b.Effective, b.Reach, b.EffectiveVia, b.EffectiveRoot, b.ReachVia, b.ReachRoot, b.Session, b.NParents}
	if a.EffectiveRoot == a.ID {
		la.EffectiveRoot = "self"
	}
	if a.ReachRoot == a.ID {
		la.ReachRoot = "self"
	}
	if b.EffectiveRoot == b.ID {
		lb.EffectiveRoot = "self"
	}
	if b.ReachRoot == b.ID {
		lb.ReachRoot = "self"
	}
	if la != lb {
		return fmt.Errorf("by reference %+v\nlisted %+v", la, lb)
	}
	return nil
}

// sameTrace compares two traces of calls that differ only in the form of
// their parents: the same ancestors, edges and untrusted sources, with the
// traced entry's ID set aside.
func sameTrace(a, b *lineage.Trace) error {
	norm := func(tr *lineage.Trace) string {
		self := tr.Root.ID
		var nodes, edges, srcs []string
		for _, n := range tr.Nodes {
			if n.ID != self {
				nodes = append(nodes, n.ID)
			}
		}
		for _, e := range tr.Edges {
			c := e.Child
			if c == self {
				c = "self"
			}
			edges = append(edges, fmt.Sprint(c, e.Parent, e.Weight, e.Strong))
		}
		for _, s := range tr.Untrusted {
			p := slices.Clone(s.Path)
			if p[0] == self {
				p[0] = "self"
			}
			if s.ID == self {
				s.ID = "self"
			}
			srcs = append(srcs, fmt.Sprint(s.ID, s.Principal, s.Tier, p, s.Strong))
		}
		return fmt.Sprint(nodes, edges, srcs, tr.Truncated)
	}
	if na, nb := norm(a), norm(b); na != nb {
		return fmt.Errorf("by reference %s\nlisted %s", na, nb)
	}
	return nil
}

// TestContextRefLikeListing is the differential test of context
// references: on random sessions (entries of every tier, strong and weak
// edges, recalls across sessions interleaved), a call that names the
// first k entries of its session's context by reference, then lists a few
// more parents, gets exactly the labels (tiers, vias, roots, the count of
// parents) of the same call listing those k entries, from the summary and
// from a fresh graph that reads the rows; its expanded parents are the
// listed call's parents; and its trace, once both are stored, has the same
// ancestors, edges and untrusted sources. On cleanup verify re-derives
// every label of both forms.
func TestContextRefLikeListing(t *testing.T) {
	who := []string{"user:alice", "agent:planner", "tool:gmail_read", "tool:web_fetch", "tool:calculator", "user:mallory"}
	weights := []float64{1, 1, 0.1, 0.6}
	calls := 0
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 31))
		w := newWorld(t)
		var ids []string
		for i := range 90 {
			session := fmt.Sprintf("s%d", r.IntN(3))
			switch k := r.IntN(10); {
			case k < 2 && len(ids) > 0:
				if err := w.recall(session, ids[r.IntN(len(ids))]); err != nil {
					t.Fatal(err)
				}
				continue
			case k < 5:
				ctx := w.contextOf(session)
				if len(ctx) == 0 {
					continue
				}
				n := len(ctx)
				if r.IntN(3) == 0 {
					n = 1 + r.IntN(len(ctx))
				}
				var extra []lineage.Parent
				for range r.IntN(3) {
					id := ids[r.IntN(len(ids))]
					if !slices.Contains(ctx[:n], id) && !slices.ContainsFunc(extra, func(p lineage.Parent) bool { return p.ID == id }) {
						extra = append(extra, lineage.Parent{ID: id, Weight: weights[r.IntN(len(weights))]})
					}
				}
				p := who[r.IntN(len(who))]
				ref, list := w.refCall(p, session, ctx, n, extra), w.listCall(p, session, ctx, n, extra)
				pr, err := w.prepare(w.g, ref)
				if err != nil {
					t.Fatalf("seed %d entry %d: %v", seed, i, err)
				}
				fr, err := w.prepare(w.fresh(), ref)
				if err != nil {
					t.Fatalf("seed %d entry %d, fresh graph: %v", seed, i, err)
				}
				pl, err := w.prepare(w.fresh(), list)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(pr.Node, fr.Node) {
					t.Fatalf("seed %d entry %d: from the summary %+v\nfrom the rows %+v", seed, i, pr.Node, fr.Node)
				}
				if err := sameLabels(pr.Node, pl.Node); err != nil {
					t.Fatalf("seed %d entry %d: %v", seed, i, err)
				}
				all, err := pr.Statement.AllParents()
				if err != nil || !slices.Equal(all, list.Parents) {
					t.Fatalf("seed %d entry %d: expanded parents %v (%v), listed %v", seed, i, all, err, list.Parents)
				}
				if len(pr.Statement.Parents) != len(extra) {
					t.Fatalf("the reference's statement lists %d parents, want %d", len(pr.Statement.Parents), len(extra))
				}
				nr, err := w.write(pr)
				if err != nil {
					t.Fatal(err)
				}
				nl, err := w.write(pl)
				if err != nil {
					t.Fatal(err)
				}
				for _, g := range []*lineage.Graph{w.g, w.fresh()} {
					tr, err := g.Trace(t.Context(), nr.ID, lineage.TraceOptions{})
					if err != nil {
						t.Fatal(err)
					}
					tl, err := g.Trace(t.Context(), nl.ID, lineage.TraceOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if err := sameTrace(tr, tl); err != nil {
						t.Fatalf("seed %d entry %d: %v", seed, i, err)
					}
				}
				calls++
				continue
			}
			var parents []lineage.Parent
			if r.IntN(3) == 0 && len(ids) > 0 {
				parents = strong(ids[r.IntN(len(ids))])
				parents[0].Weight = weights[r.IntN(len(weights))]
			} else {
				parents = w.context(session)
			}
			ids = append(ids, w.record(who[r.IntN(len(who))], session, fmt.Sprint(seed, i), parents).ID)
		}
	}
	if calls < 100 {
		t.Fatalf("only %d calls compared", calls)
	}
	t.Logf("%d calls compared both ways", calls)
}

// refWorld is a session s of five entries, the second untrusted, and a
// call naming its first four by reference, signed but not stored.
func refWorld(t *testing.T) (*world, []string, []byte) {
	w := newWorld(t)
	var ctx []string
	for i, p := range []string{"user:alice", "tool:web_fetch", "agent:planner", "tool:gmail_read", "agent:planner"} {
		ctx = append(ctx, w.record(p, "s", fmt.Sprint(i), nil).ID)
	}
	env, _, err := lineage.Sign(w.keys["agent:planner"], w.refCall("agent:planner", "s", ctx, 4, nil))
	if err != nil {
		t.Fatal(err)
	}
	return w, ctx, env
}

func rowKey(session string, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte("s/"+session+"\x00"), n)
}

// The context rows a reference names can be dropped, swapped or renamed by
// whoever writes the store; the reference's signed head catches each.
var rowTampering = map[string]func(w *world, ctx []string) func(kv.Txn) error{
	"dropped": func(_ *world, _ []string) func(kv.Txn) error {
		return func(tx kv.Txn) error { return tx.Delete(rowKey("s", 2)) }
	},
	"dropped and renumbered": func(_ *world, ctx []string) func(kv.Txn) error {
		return func(tx kv.Txn) error { return setRows(tx, "s", slices.Delete(slices.Clone(ctx), 1, 2)) }
	},
	"swapped": func(_ *world, ctx []string) func(kv.Txn) error {
		c := slices.Clone(ctx)
		c[1], c[2] = c[2], c[1]
		return func(tx kv.Txn) error { return setRows(tx, "s", c) }
	},
	"renamed": func(_ *world, ctx []string) func(kv.Txn) error {
		return func(tx kv.Txn) error { return tx.Set(rowKey("s", 1), []byte(ctx[4])) }
	},
	"last row dropped": func(_ *world, _ []string) func(kv.Txn) error {
		return func(tx kv.Txn) error { return tx.Delete(rowKey("s", 3)) }
	},
	"tail dropped, the head counting to the reference's end": func(_ *world, ctx []string) func(kv.Txn) error {
		return func(tx kv.Txn) error {
			if err := setRows(tx, "s", ctx[:4]); err != nil {
				return err
			}
			return tx.Delete(rowKey("s", 3))
		}
	},
	"cut short": func(_ *world, ctx []string) func(kv.Txn) error {
		return func(tx kv.Txn) error { return setRows(tx, "s", ctx[:2]) }
	},
}

// TestContextRefTamperedBeforeInsert: a call naming its context by
// reference is refused when a row it names was changed before it is
// stored (a fresh graph, which reads the rows): ErrTampered, or, for a
// context cut short with its head rewritten to match, ErrUnknownParent.
// It is never stored with fewer ancestors.
func TestContextRefTamperedBeforeInsert(t *testing.T) {
	for name, tamper := range rowTampering {
		t.Run(name, func(t *testing.T) {
			w, ctx, env := refWorld(t)
			w.tamper(tamper(w, ctx))
			_, err := w.fresh().Prepare(t.Context(), env, nil)
			want := registry.ErrTampered
			if name == "cut short" {
				want = lineage.ErrUnknownParent
			}
			if !errors.Is(err, want) {
				t.Fatalf("prepared over %s rows: %v, want %v", name, err, want)
			}
		})
	}
}

// TestContextRefRefusedPastTheContext: a reference to more entries than the
// context holds, or to a head that is not the context's, is refused, from
// the summary as from the rows.
func TestContextRefRefusedPastTheContext(t *testing.T) {
	w, ctx, _ := refWorld(t)
	w.contextOf("s")
	for _, g := range []*lineage.Graph{w.g, w.fresh()} {
		if _, err := g.Context(t.Context(), "s"); err != nil {
			t.Fatal(err)
		}
		past := w.refCall("agent:planner", "s", ctx, 5, nil)
		past.Context.N = 6
		if _, err := w.prepare(g, past); !errors.Is(err, lineage.ErrUnknownParent) {
			t.Fatalf("a reference past the context: %v", err)
		}
		other := w.refCall("agent:planner", "s", ctx, 3, nil)
		other.Context.Head = chainHex([]string{ctx[0], ctx[2], ctx[1]})
		if _, err := w.prepare(g, other); !errors.Is(err, registry.ErrTampered) {
			t.Fatalf("a reference to another head: %v", err)
		}
		dup := w.refCall("agent:planner", "s", ctx, 3, strong(ctx[1]))
		if _, err := w.prepare(g, dup); !errors.Is(err, lineage.ErrMalformed) {
			t.Fatalf("a call listing an entry its reference names: %v", err)
		}
		ok := w.refCall("agent:planner", "s", ctx, 3, strong(ctx[4]))
		if _, err := w.prepare(g, ok); err != nil {
			t.Fatalf("a call listing an entry past its reference: %v", err)
		}
	}
}

// TestContextRefTamperedAfterStore: once a call naming its context by
// reference is stored, a row it names changed behind the engine's back is
// reported by verify on the call, and refused by a trace (ErrTampered),
// which never returns its ancestry without the entry.
func TestContextRefTamperedAfterStore(t *testing.T) {
	for name, tamper := range rowTampering {
		t.Run(name, func(t *testing.T) {
			w, ctx, env := refWorld(t)
			call, err := w.insert(env, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tr, err := w.fresh().Trace(t.Context(), call.ID, lineage.TraceOptions{}); err != nil || len(tr.Nodes) != 5 || len(tr.Untrusted) != 2 {
				t.Fatalf("trace before tampering: %v, %+v", err, tr)
			}
			w.tamper(tamper(w, ctx))
			var found bool
			for _, p := range w.verify().Problems {
				found = found || (p.ID == call.ID && strings.Contains(p.What, "context"))
			}
			if !found {
				t.Fatalf("verify did not report the call over %s rows: %+v", name, w.verify().Problems)
			}
			if _, err := w.fresh().Trace(t.Context(), call.ID, lineage.TraceOptions{}); !errors.Is(err, registry.ErrTampered) && !errors.Is(err, lineage.ErrUnknownParent) {
				t.Fatalf("trace over %s rows: %v", name, err)
			}
			if _, err := w.fresh().Parents(call.ID); err == nil {
				t.Fatalf("parents over %s rows read", name)
			}
		})
	}
}

// TestContextRefVerifyRecomputesLabels: verify recomputes a reference
// call's labels from the context's entries: a node row that forgets the
// untrusted one (its labels, or the reference itself) is reported.
func TestContextRefVerifyRecomputesLabels(t *testing.T) {
	for name, fn := range map[string]func(*lineage.Node){
		"labels": func(n *lineage.Node) {
			n.Effective, n.Reach, n.EffectiveVia, n.ReachVia, n.EffectiveRoot, n.ReachRoot = n.Tier, n.Tier, "", "", "", ""
		},
		"reference": func(n *lineage.Node) { n.Context = nil },
		"count":     func(n *lineage.Node) { n.Context.N = 1 },
	} {
		t.Run(name, func(t *testing.T) {
			w, _, env := refWorld(t)
			call, err := w.insert(env, nil)
			if err != nil {
				t.Fatal(err)
			}
			if call.Effective.Trusted() || call.NParents != 4 || call.Context == nil {
				t.Fatalf("call labelled %+v", call)
			}
			w.tamper(func(tx kv.Txn) error {
				row, err := tx.Get([]byte("n/" + call.ID))
				if err != nil {
					return err
				}
				row, err = lineage.RewriteNode(row, fn)
				if err != nil {
					return err
				}
				return tx.Set([]byte("n/"+call.ID), row)
			})
			var found bool
			for _, p := range w.verify().Problems {
				found = found || p.ID == call.ID
			}
			if !found {
				t.Fatalf("verify did not report the call's rewritten %s", name)
			}
		})
	}
}

// TestContextRefStatementRules: version 2 exactly when a reference is
// there, only on a call in a session, 1 to MaxContextRef entries, a full
// head, no plan citation; version 1 is unchanged.
func TestContextRefStatementRules(t *testing.T) {
	w := newWorld(t)
	ctx := []string{strings.Repeat("ab", 32)}
	good := func() *lineage.Statement { return w.refCall("agent:planner", "s", ctx, 1, nil) }
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	max := good()
	max.Context.N = lineage.MaxContextRef
	if err := max.Validate(); err != nil {
		t.Fatalf("a reference of MaxContextRef entries: %v", err)
	}
	for name, fn := range map[string]func(*lineage.Statement){
		"version 1 with a reference":  func(s *lineage.Statement) { s.Version = 1 },
		"version 3":                   func(s *lineage.Statement) { s.Version = 3 },
		"version 2 without reference": func(s *lineage.Statement) { s.Context = nil },
		"a memory entry": func(s *lineage.Statement) {
			s.Kind, s.Tool, s.Args = lineage.KindMemory, "", nil
		},
		"no session":        func(s *lineage.Statement) { s.Session = "" },
		"no entry":          func(s *lineage.Statement) { s.Context.N = 0 },
		"too many":          func(s *lineage.Statement) { s.Context.N = lineage.MaxContextRef + 1 },
		"short head":        func(s *lineage.Statement) { s.Context.Head = s.Context.Head[:63] },
		"upper-case head":   func(s *lineage.Statement) { s.Context.Head = strings.ToUpper(s.Context.Head) },
		"plan step":         func(s *lineage.Statement) { s.Plan = &lineage.PlanRef{ID: ctx[0], Step: 0}; s.Parents = strong(ctx[0]) },
		"bad listed parent": func(s *lineage.Statement) { s.Parents = strong("nope") },
	} {
		s := good()
		fn(s)
		if err := s.Validate(); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	v1 := w.listCall("agent:planner", "s", ctx, 1, nil)
	payload, err := v1.Encode()
	if err != nil || strings.Contains(string(payload), "context") {
		t.Fatalf("a version 1 statement encodes a reference: %s, %v", payload, err)
	}
	if _, err := good().AllParents(); !errors.Is(err, lineage.ErrUnexpanded) {
		t.Fatalf("the parents of an unresolved reference: %v", err)
	}
	if ps, err := v1.AllParents(); err != nil || !slices.Equal(ps, v1.Parents) {
		t.Fatalf("the parents of a version 1 call: %v, %v", ps, err)
	}
}

// TestContextRefExpand: Expand resolves a reference as Prepare does, and
// leaves a version 1 statement as it is.
func TestContextRefExpand(t *testing.T) {
	w, ctx, _ := refWorld(t)
	for _, g := range []*lineage.Graph{w.g, w.fresh()} {
		st := w.refCall("agent:planner", "s", ctx, 3, strong(ctx[4]))
		got, err := g.Expand(st)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := got.AllParents()
		if err != nil || !slices.Equal(ps, strong(ctx[0], ctx[1], ctx[2], ctx[4])) {
			t.Fatalf("expanded to %v, %v", ps, err)
		}
		st.Context.Head = chainHex(ctx[:2])
		if _, err := g.Expand(st); !errors.Is(err, registry.ErrTampered) {
			t.Fatalf("expanded a wrong head: %v", err)
		}
		st.Context.N = 0
		if _, err := g.Expand(st); !errors.Is(err, lineage.ErrMalformed) {
			t.Fatalf("expanded a reference to no entry: %v", err)
		}
		v1 := w.listCall("agent:planner", "s", ctx, 2, nil)
		if got, err := g.Expand(v1); err != nil || got != v1 {
			t.Fatalf("a version 1 statement expanded to %v, %v", got, err)
		}
	}
	ref, err := w.g.ContextRef("s")
	if err != nil || *ref != (lineage.ContextRef{N: 5, Head: chainHex(ctx)}) {
		t.Fatalf("ContextRef = %+v, %v", ref, err)
	}
	if ref, err := w.g.ContextRef("empty"); err != nil || ref != nil {
		t.Fatalf("ContextRef of an empty session = %+v, %v", ref, err)
	}
}

// TestNodeRowFormats: an entry without a reference keeps the format 2 row
// (what every stored row is); one with a reference is format 3 and reads
// back whole, and a format 3 row with a bad reference does not decode.
func TestNodeRowFormats(t *testing.T) {
	n := &lineage.Node{ID: strings.Repeat("ab", 32), Principal: "agent:planner", Kind: lineage.KindCall, Session: "s", Time: "t",
		Parents: strong(strings.Repeat("cd", 32)), NParents: 1}
	row := lineage.NodeRow(n)
	if row[0] != 2 {
		t.Fatalf("a row without a reference is format %d", row[0])
	}
	back, err := lineage.RewriteNode(row, func(*lineage.Node) {})
	if err != nil || string(back) != string(row) {
		t.Fatalf("a format 2 row reads back as %x, %v", back, err)
	}
	n.Context, n.NParents = &lineage.ContextRef{N: 7, Head: strings.Repeat("ef", 32)}, 8
	row = lineage.NodeRow(n)
	if row[0] != 3 {
		t.Fatalf("a row with a reference is format %d", row[0])
	}
	var got *lineage.Node
	if _, err := lineage.RewriteNode(row, func(m *lineage.Node) { got = m }); err != nil || !reflect.DeepEqual(got, n) {
		t.Fatalf("a format 3 row reads back as %+v, %v", got, err)
	}
	if _, err := lineage.RewriteNode(refRow(n, lineage.MaxContextRef), func(*lineage.Node) {}); err != nil {
		t.Fatalf("a row naming MaxContextRef entries: %v", err)
	}
	for name, bad := range map[string][]byte{
		"no reference":     append([]byte{3}, lineage.NodeRow(&lineage.Node{ID: n.ID, Parents: n.Parents})[1:]...),
		"no head":          row[:len(row)-32],
		"a zero count":     refRow(n, 0),
		"a count past max": refRow(n, lineage.MaxContextRef+1),
		"format 4":         append([]byte{4}, row[1:]...),
		"trailing":         append(slices.Clone(row), 0),
		"absent head (0)":  append(slices.Clone(row[:len(row)-33]), 0),
	} {
		if _, err := lineage.RewriteNode(bad, func(*lineage.Node) {}); err == nil {
			t.Errorf("a row with %s decodes", name)
		}
	}
}

// refRow is n's format 3 row with its reference's count set to count.
func refRow(n *lineage.Node, count uint64) []byte {
	plain := *n
	plain.Context = nil
	row := lineage.NodeRow(&plain)
	row[0] = 3
	row = binary.AppendUvarint(row, count)
	head, _ := hex.DecodeString(n.Context.Head)
	return append(append(row, 1), head...)
}

// TestContextRefFromTheSummaryReadsNoRow: with the session's summary in
// memory (built from rows checked against the head), a reference to the
// whole context is resolved and labelled from it alone, in O(1): the rows
// deleted afterwards are not read. A fresh graph, which has no summary,
// reads them and refuses.
func TestContextRefFromTheSummaryReadsNoRow(t *testing.T) {
	w, ctx, _ := refWorld(t)
	if _, err := w.g.Context(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	want, err := w.prepare(w.g, w.listCall("agent:planner", "s", ctx, 5, nil))
	if err != nil {
		t.Fatal(err)
	}
	w.tamper(func(tx kv.Txn) error { return setRows(tx, "s", nil) })
	ref := w.refCall("agent:planner", "s", ctx, 5, nil)
	got, err := w.prepare(w.g, ref)
	if err != nil {
		t.Fatalf("from the summary: %v", err)
	}
	if err := sameLabels(got.Node, want.Node); err != nil {
		t.Fatal(err)
	}
	if _, err := w.prepare(w.fresh(), ref); err == nil {
		t.Fatal("a fresh graph resolved a reference to deleted rows")
	}
}

// TestContextRefListedParentOutsideTheCache: a call whose reference the
// summary resolves, listing a parent that is not in the node cache, reads
// that parent's node and folds it in.
func TestContextRefListedParentOutsideTheCache(t *testing.T) {
	w, ctx, _ := refWorld(t)
	other := w.record("tool:web_fetch", "t", "elsewhere", nil)
	g := w.fresh()
	if _, err := g.Context(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	p, err := w.prepare(g, w.refCall("user:alice", "s", ctx, 1, strong(other.ID)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Node.Effective.Trusted() || p.Node.EffectiveVia != other.ID || p.Node.NParents != 2 {
		t.Fatalf("labelled %+v", p.Node)
	}
}
