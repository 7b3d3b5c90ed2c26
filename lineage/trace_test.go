package lineage_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

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
