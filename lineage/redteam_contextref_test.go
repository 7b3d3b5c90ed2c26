package lineage_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/pedigree-ai/pedigree/lineage"
)

// TestRedTeamContextRefHugeCountAllocates: a client with any principal's
// key signs a call naming MaxContextRef (16M) entries of a session that
// holds five, against a graph without the session's summary (a fresh
// process, a summary evicted, a fleet node). It is refused
// (ErrUnknownParent), but reading the rows must not first allocate room for
// 16M IDs (256 MB per request): a few such calls at once would take the
// process down.
func TestRedTeamContextRefHugeCountAllocates(t *testing.T) {
	w, ctx, _ := refWorld(t)
	huge := w.refCall("agent:planner", "s", ctx, 5, nil)
	huge.Context.N = lineage.MaxContextRef
	g := w.fresh()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := w.prepare(g, huge)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, lineage.ErrUnknownParent) {
		t.Fatalf("a reference past the context: %v, want ErrUnknownParent", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("refusing a reference of %d entries to a context of 5 allocated %d MB", huge.Context.N, got>>20)
	}
}

// TestRedTeamPreviewUnvalidatedReference: Graph.Preview labels a statement
// that was neither signed nor validated (a dry run). One naming zero, or a
// negative count, of a summarised context must be refused as malformed,
// not index the summary's chains at -1 and take the process down.
func TestRedTeamPreviewUnvalidatedReference(t *testing.T) {
	w, ctx, _ := refWorld(t)
	if _, err := w.g.Context(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1} {
		st := w.refCall("agent:planner", "s", ctx, 1, nil)
		st.Context.N = n
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("a preview of a reference to %d entries panicked: %v", n, r)
				}
			}()
			if _, err := w.g.Preview(st); !errors.Is(err, lineage.ErrMalformed) {
				t.Fatalf("a preview of a reference to %d entries: %v, want ErrMalformed", n, err)
			}
		}()
	}
}
