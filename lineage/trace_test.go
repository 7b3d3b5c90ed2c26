package lineage_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

func TestTrace(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	email := w.record("tool:gmail_read", "", "mail", nil)
	web := w.record("tool:web_fetch", "", "page", nil)
	prompt := w.record("user:alice", "", "prompt", nil)
	sum := w.record("agent:planner", "", "summary", strong(email.ID))
	// mem: strongly from the summary and the prompt, weakly from the web page.
	mem := w.record("agent:planner", "", "memory", []lineage.Parent{{ID: sum.ID, Weight: 0.9}, {ID: prompt.ID, Weight: 1}, {ID: web.ID, Weight: 0.2}})

	tr, err := w.g.Trace(ctx, mem.ID, lineage.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Truncated || len(tr.Nodes) != 5 || len(tr.Edges) != 4 {
		t.Fatalf("trace: %d nodes, %d edges, truncated %v; want 5, 4, false", len(tr.Nodes), len(tr.Edges), tr.Truncated)
	}
	if tr.Nodes[0].ID != mem.ID {
		t.Fatalf("first node %s, want the traced entry", tr.Nodes[0].ID[:12])
	}
	got := map[string]lineage.Source{}
	for _, s := range tr.Untrusted {
		got[s.ID] = s
	}
	if s := got[email.ID]; !s.Strong || !slices.Equal(s.Path, []string{mem.ID, sum.ID, email.ID}) || s.Tier != registry.External {
		t.Fatalf("email source %+v, want a strong path mem -> sum -> email", s)
	}
	if s := got[web.ID]; s.Strong || !slices.Equal(s.Path, []string{mem.ID, web.ID}) || s.Tier != registry.Unverified {
		t.Fatalf("web source %+v, want a weak path mem -> web", s)
	}
	if len(got) != 2 {
		t.Fatalf("%d untrusted sources, want 2", len(got))
	}

	t.Run("depth bound", func(t *testing.T) {
		tr, err := w.g.Trace(ctx, mem.ID, lineage.TraceOptions{MaxDepth: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Truncated || len(tr.Nodes) != 4 {
			t.Fatalf("depth 1: %d nodes truncated %v, want 4 and truncated", len(tr.Nodes), tr.Truncated)
		}
	})
	t.Run("depth bound at the roots", func(t *testing.T) {
		tr, err := w.g.Trace(ctx, mem.ID, lineage.TraceOptions{MaxDepth: 2})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Truncated || len(tr.Nodes) != 5 || len(tr.Untrusted) != 2 {
			t.Fatalf("depth 2: %d nodes, %d sources, truncated %v; want all 5, 2 sources, not truncated", len(tr.Nodes), len(tr.Untrusted), tr.Truncated)
		}
	})
	t.Run("node bound", func(t *testing.T) {
		tr, err := w.g.Trace(ctx, mem.ID, lineage.TraceOptions{MaxNodes: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Truncated || len(tr.Nodes) != 2 {
			t.Fatalf("2 nodes: got %d truncated %v", len(tr.Nodes), tr.Truncated)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if _, err := w.g.Trace(ctx, strings.Repeat("0", 64), lineage.TraceOptions{}); !errors.Is(err, lineage.ErrUnknownEntry) {
			t.Fatalf("trace of an unknown ID: %v", err)
		}
	})
}

// Witnesses name, for each node, the untrusted root of its effective tier
// (a strong path) and then that of its reach tier when it is another entry
// (a path with a weak edge); a trusted label has none.
func TestWitnesses(t *testing.T) {
	w := newWorld(t)
	email := w.record("tool:gmail_read", "", "mail", nil)
	web := w.record("tool:web_fetch", "", "page", nil)
	prompt := w.record("user:alice", "", "prompt", nil)
	b2 := w.record("tool:gmail_read", "", "another mail", nil)
	weak := func(id string) lineage.Parent { return lineage.Parent{ID: id, Weight: 0.2} }
	one := w.record("agent:planner", "", "one root", []lineage.Parent{{ID: email.ID, Weight: 1}, weak(web.ID)})
	reachOnly := w.record("agent:planner", "", "reach only", []lineage.Parent{{ID: prompt.ID, Weight: 1}, weak(web.ID)})
	two := w.record("agent:planner", "", "two roots", []lineage.Parent{{ID: web.ID, Weight: 1}, weak(email.ID)})
	below := w.record("agent:planner", "", "below two", strong(two.ID))
	clean := w.record("agent:planner", "", "clean", strong(prompt.ID))

	got, err := w.fresh().Witnesses([]*lineage.Node{one, reachOnly, two, below, clean, email})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		id     string
		path   []string
		strong bool
	}
	for i, ws := range [][]want{
		{{email.ID, []string{one.ID, email.ID}, true}},
		{{web.ID, []string{reachOnly.ID, web.ID}, false}},
		{{web.ID, []string{two.ID, web.ID}, true}, {email.ID, []string{two.ID, email.ID}, false}},
		{{web.ID, []string{below.ID, two.ID, web.ID}, true}, {email.ID, []string{below.ID, two.ID, email.ID}, false}},
		{},
		{{email.ID, []string{email.ID}, true}},
	} {
		if len(got[i]) != len(ws) {
			t.Fatalf("node %d: %d witnesses %+v, want %d", i, len(got[i]), got[i], len(ws))
		}
		for j, wn := range ws {
			s := got[i][j]
			if s.ID != wn.id || !slices.Equal(s.Path, wn.path) || s.Strong != wn.strong {
				t.Errorf("node %d witness %d: %+v, want %+v", i, j, s, wn)
			}
		}
	}
	// Same tier, other roots: the reach witness is not the effective one.
	sameTier := w.record("agent:planner", "", "same tier", []lineage.Parent{weak(b2.ID), {ID: email.ID, Weight: 1}})
	got, err = w.g.Witnesses([]*lineage.Node{sameTier})
	if err != nil || len(got[0]) != 2 || got[0][0].ID != email.ID || !got[0][0].Strong || got[0][1].ID != b2.ID || got[0][1].Strong {
		t.Fatalf("same tier, other roots: %+v %v", got, err)
	}
	for _, c := range []struct {
		n      *lineage.Node
		strong bool
	}{{one, true}, {sameTier, false}, {two, false}} {
		if s, err := w.g.Witness(c.n, true); err != nil || s.Strong != c.strong {
			t.Errorf("reach witness of %s: %+v %v, want strong %v", c.n.ID[:8], s, err, c.strong)
		}
	}
	if s, err := w.g.Witness(clean, true); err != nil || s != nil {
		t.Fatalf("reach witness of a trusted entry: %+v %v", s, err)
	}
	s, err := w.g.Witness(two, true)
	if err != nil || s.ID != email.ID || s.Tier != registry.External || s.Principal != "tool:gmail_read" || s.Strong {
		t.Fatalf("reach witness of two: %+v %v", s, err)
	}
}

// A chain whose links were edited is an error, never a trusted label.
func TestWitnessBrokenChain(t *testing.T) {
	w := newWorld(t)
	email := w.record("tool:gmail_read", "", "mail", nil)
	mem := w.record("agent:planner", "", "memory", strong(email.ID))
	child := w.record("agent:planner", "", "child", strong(mem.ID))
	w.tamper(func(tx kv.Txn) error {
		if err := rewriteNode(tx, mem.ID, func(n *lineage.Node) { n.EffectiveVia, n.ReachVia = "", "" }); err != nil {
			return err
		}
		return nil
	})
	g := w.fresh()
	for _, reach := range []bool{false, true} {
		if _, err := g.Witness(child, reach); err == nil || !strings.Contains(err.Error(), "is broken at "+mem.ID) {
			t.Errorf("reach %v: %v, want a broken chain at the memory", reach, err)
		}
	}
	if _, err := g.Witnesses([]*lineage.Node{child}); err == nil {
		t.Error("Witnesses over a broken chain succeeded")
	}
}

// The walk to a witness is bounded: a chain of MaxWitnessPath entries is
// followed, a longer one (or one whose links were edited into a loop) is an
// error, so no node row can make a check walk without end. The chains are
// node rows written directly: signing 4097 entries would only slow the test.
func TestWitnessPathBound(t *testing.T) {
	w := newWorld(t)
	id := func(i int) string { return fmt.Sprintf("%064x", i+1) }
	chain := func(n int) *lineage.Node {
		var last *lineage.Node
		w.tamper(func(tx kv.Txn) error {
			for i := range n {
				nd := &lineage.Node{ID: id(i), Principal: "agent:planner", Kind: lineage.KindSummary, Time: "t",
					Tier: registry.Internal, Effective: registry.External, Reach: registry.External, EffectiveRoot: id(0), ReachRoot: id(0)}
				if i == 0 {
					nd.Principal, nd.Tier = "tool:gmail_read", registry.External
				} else {
					nd.EffectiveVia, nd.ReachVia = id(i-1), id(i-1)
				}
				if err := tx.Set([]byte("n/"+nd.ID), lineage.NodeRow(nd)); err != nil {
					return err
				}
				last = nd
			}
			return nil
		})
		return last
	}
	s, err := w.fresh().Witness(chain(lineage.MaxWitnessPath), false)
	if err != nil || len(s.Path) != lineage.MaxWitnessPath || s.ID != id(0) {
		t.Fatalf("a chain of %d: %v", lineage.MaxWitnessPath, err)
	}
	if _, err := w.fresh().Witness(chain(lineage.MaxWitnessPath+1), false); err == nil {
		t.Fatalf("a chain of %d was followed", lineage.MaxWitnessPath+1)
	}
	// Two rows that name each other, the root elsewhere.
	loop := func(self, other string) *lineage.Node {
		return &lineage.Node{ID: self, Principal: "agent:planner", Kind: lineage.KindSummary, Time: "t", Tier: registry.Internal,
			Effective: registry.External, Reach: registry.External, EffectiveVia: other, ReachVia: other, EffectiveRoot: id(0), ReachRoot: id(0)}
	}
	a, b := loop(strings.Repeat("a", 64), strings.Repeat("b", 64)), loop(strings.Repeat("b", 64), strings.Repeat("a", 64))
	w.tamper(func(tx kv.Txn) error {
		if err := tx.Set([]byte("n/"+a.ID), lineage.NodeRow(a)); err != nil {
			return err
		}
		return tx.Set([]byte("n/"+b.ID), lineage.NodeRow(b))
	})
	for _, reach := range []bool{false, true} {
		if _, err := w.fresh().Witness(a, reach); err == nil {
			t.Errorf("reach %v: a loop was followed", reach)
		}
	}
}
