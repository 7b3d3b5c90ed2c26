package gateway

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// A session's context outgrows what one call may list as parents
// (lineage.MaxParents). In front of the engine, the gateway's call names
// the whole context by reference; in front of a backend that lists it (a
// sidecar client), the gateway justifies its calls by rollups of the oldest
// entries and the context's tail. Either way a long clean session's calls
// are still allowed, and an untrusted entry at the very start of a long
// session still denies.
func TestLongSessionRollsUp(t *testing.T) {
	for _, listing := range []bool{false, true} {
		t.Run(fmt.Sprintf("listing=%v", listing), func(t *testing.T) { longSession(t, listing) })
	}
}

func longSession(t *testing.T, listing bool) {
	w := buildWorld(t, catalogDeny, registry.Internal, false) // the first call's output is clean
	if listing {
		w.listing = true
		w.start(t, Enforce)
	}
	for _, poisoned := range []bool{false, true} {
		c := w.connect(t, "2025-11-25", "")
		first := c.call("list_allowed_directories", map[string]any{})
		session := meta(t, first).Session
		if session == "" {
			t.Fatalf("no session in the first call's decision: %v", first.Meta)
		}
		w.settle()
		for i := range lineage.MaxParents + 100 {
			p := "user:alice"
			if poisoned && i == 0 {
				p = "tool:evil"
			}
			if _, err := w.E.Record(t.Context(), w.Keys[p], pedigree.Entry{Principal: p, Kind: lineage.KindToolOutput,
				Session: session, Content: fmt.Appendf(nil, "entry %d", i), Parents: []lineage.Parent{}}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 { // the second call reuses the rollups
			out := filepath.Join(w.work, "out", fmt.Sprintf("long-%v-%d.txt", poisoned, i))
			res := c.call("write_file", map[string]any{"path": out, "content": "hello"})
			d := meta(t, res)
			switch {
			case !poisoned && (res.IsError || d.Decision != gate.Allow || !exists(out)):
				t.Fatalf("a long clean session's write (call %d): %s %q", i, d.Decision, text(res))
			case poisoned && (!res.IsError || d.Decision != gate.Deny || exists(out) || len(d.Untrusted) == 0 || d.Untrusted[0].Principal != "tool:evil"):
				t.Fatalf("a long session whose first entry is untrusted (call %d): %s %+v %q", i, d.Decision, d.Untrusted, text(res))
			}
			// By reference the call rests on every entry itself; listed,
			// on rollups (agent summaries) and the tail.
			v, err := w.E.Show(t.Context(), d.CallID)
			if err != nil {
				t.Fatal(err)
			}
			if byRef := v.Node.Context != nil; byRef == listing || byRef && v.Node.NParents <= lineage.MaxParents || !byRef && v.Node.NParents > lineage.MaxParents {
				t.Fatalf("listing=%v: the call names its context by reference: %v, with %d parents", listing, byRef, v.Node.NParents)
			}
			w.settle()
		}
	}
}
