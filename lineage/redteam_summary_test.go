package lineage_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// Two checks of one session run side by side while an entry joins it:
// the first reads the session's head in its read transaction, the entry
// commits, and the second (a newer snapshot) extends the summary past the
// first's head. The first's context is then refused as edited
// (ErrTampered), though nothing was edited: a summary that holds more than
// a snapshot's head is a newer snapshot, not a shrunk context. A fresh
// graph (no summary) reads the first snapshot's context whole and fine.
func TestRedTeamSummaryOlderSnapshotIsNotTampering(t *testing.T) {
	w := newWorld(t)
	w.record("user:alice", "s", "first", nil)
	w.context("s") // the summary holds a
	err := w.space().View(func(old kv.Txn) error {
		want, err := w.fresh().ContextIn(old, "s")
		if err != nil {
			return err
		}
		// another check's entry and context, committed meanwhile
		b := w.record("tool:web_fetch", "s", "second", w.context("s"))
		if ids := w.context("s"); len(ids) != 2 || ids[1].ID != b.ID {
			t.Fatalf("the newer context is %v, not a, b", ids)
		}
		got, err := w.g.ContextIn(old, "s")
		if errors.Is(err, registry.ErrTampered) {
			t.Fatalf("the older snapshot's context, read with the newer summary: %v (a fresh graph reads %d entries)", err, len(want))
		}
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			t.Fatalf("the older snapshot's context is %v, a fresh graph reads %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
