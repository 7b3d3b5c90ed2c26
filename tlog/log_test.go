package tlog_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
	"github.com/pedigree-ai/pedigree/tlog"
)

// logWorld records n entries and a few gate decisions, with checkpoints.
func logWorld(t *testing.T, n int) (*enginetest.World, []string, []string) {
	t.Helper()
	w := enginetest.NewOnDisk(t, enginetest.Default)
	var ids, decisions []string
	for i := range n {
		who := []string{"user:alice", "tool:gmail_read", "agent:planner"}[i%3]
		ids = append(ids, w.Record(who, "s", fmt.Sprint("entry ", i), enginetest.Strong(ids[max(0, len(ids)-1):]...)).ID)
		if i%4 == 3 {
			d := w.Check("agent:planner", pedigree.Call{Session: "s", Tool: "send", Args: []byte(fmt.Sprintf(`{"i":%d}`, i)), Justification: ids[len(ids)-1:]})
			decisions = append(decisions, d.ID)
		}
		if i == n/2 || i == n-1 {
			if _, err := w.E.Log().Checkpoint(t.Context(), w.Operator); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w, ids, decisions
}

func TestLogRootMatchesReference(t *testing.T) {
	w, ids, decisions := logWorld(t, 13)
	cps, err := hatch.Log(w.E).Checkpoints()
	if err != nil || len(cps) != 2 {
		t.Fatalf("checkpoints %v %v", cps, err)
	}
	size, _ := hatch.Log(w.E).Size()
	// Each check logs its call entry and its decision.
	if want := uint64(len(ids) + 2*len(decisions)); size != want || cps[1].Size != size {
		t.Fatalf("log size %d, checkpoint %d, want %d", size, cps[1].Size, want)
	}
	// Recompute the root of the whole log independently, from the leaves in
	// append order (entries and decisions interleaved as they happened).
	var leaves [][]byte
	w.E.Close()
	db, err := store.Open(w.Dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *store.Txn) error {
		return tx.Iterate([]byte("l/leaf/"), true, func(_, v []byte) error {
			data := append([]byte("pedigree-log-v1\x00"), v...)
			leaves = append(leaves, rfc6962.DefaultHasher.HashLeaf(data))
			return nil
		})
	})
	db.Close()
	w.E = nil
	r := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	for _, l := range leaves {
		r.Append(l, nil)
	}
	root, _ := r.GetRootHash(nil)
	if fmt.Sprintf("%x", root) != cps[1].Root {
		t.Fatalf("root %x, checkpoint says %s", root, cps[1].Root)
	}
}

func TestInclusionAndConsistency(t *testing.T) {
	w, ids, decisions := logWorld(t, 21)
	g := hatch.Log(w.E)
	cps, _ := g.Checkpoints()
	for _, id := range append(append([]string{}, ids...), decisions...) {
		p, err := g.Prove(id, 0)
		if err != nil {
			t.Fatalf("prove %s: %v", id[:12], err)
		}
		// A proof for another leaf's hash must not verify.
		forged := *p
		forged.Index = (p.Index + 1) % p.Checkpoint.Size
		if forged.Verify() == nil {
			t.Fatalf("a proof verified at the wrong index")
		}
	}
	// An entry logged after the first checkpoint is not in it.
	if _, err := g.Prove(ids[len(ids)-1], cps[0].Size); !errors.Is(err, tlog.ErrNoCheckpoint) {
		t.Fatalf("prove against an older checkpoint: %v", err)
	}
	c, err := g.Consistency(cps[0].Size, cps[1].Size)
	if err != nil {
		t.Fatal(err)
	}
	c.Old.Root = c.New.Root
	if c.Verify() == nil {
		t.Fatal("a consistency proof verified against a wrong root")
	}
	if _, err := g.Prove(strings.Repeat("ab", 32), 0); !errors.Is(err, tlog.ErrNotLogged) {
		t.Fatalf("unknown ID: %v", err)
	}
}

// tamperLog builds a logged store, applies fn, and returns verify's report.
func tamperLog(t *testing.T, fn func(tx *store.Txn, ids, decisions []string) error) *lineage.Report {
	t.Helper()
	w, ids, decisions := logWorld(t, 12)
	if r, err := w.E.Verify(t.Context()); err != nil || !r.OK() {
		t.Fatalf("clean store: %+v %v", r, err)
	}
	w.Tamper(func(tx *store.Txn) error { return fn(tx, ids, decisions) })
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	r, err := w.E.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func anyProblem(t *testing.T, r *lineage.Report, what string) {
	t.Helper()
	for _, p := range r.Problems {
		if strings.Contains(p.What, what) {
			return
		}
	}
	t.Fatalf("no problem saying %q in %+v", what, r.Problems)
}

func TestLogCatchesDeletedEntry(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, ids, _ []string) error {
		// Delete an entry with no children, everywhere but the log.
		id := ids[len(ids)-1]
		for _, k := range []string{"lin/e/" + id, "lin/n/" + id} {
			tx.Delete([]byte(k))
		}
		return tx.Iterate([]byte("lin/q/"), true, func(k, v []byte) error {
			if string(v) == id {
				return tx.Delete(append([]byte(nil), k...))
			}
			return nil
		})
	})
	anyProblem(t, r, "the logged entry is missing")
}

func TestLogCatchesRewrittenDecision(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, _, decisions []string) error {
		k := []byte("dec/g/" + decisions[0])
		b, _ := tx.Get(k)
		return tx.Set(k, []byte(strings.Replace(string(b), `"decision":"deny"`, `"decision":"allow"`, 1)))
	})
	anyProblem(t, r, "does not hash to its ID")
}

func TestLogCatchesDeletedDecision(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, _, decisions []string) error {
		return tx.Delete([]byte("dec/g/" + decisions[1]))
	})
	anyProblem(t, r, "the logged decision is missing")
}

func TestLogCatchesReorderedLeaves(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, _, _ []string) error {
		// Swap two leaves and their hashes consistently: only the signed
		// checkpoint can tell.
		a, b := binary.BigEndian.AppendUint64([]byte("l/leaf/"), 2), binary.BigEndian.AppendUint64([]byte("l/leaf/"), 3)
		va, _ := tx.Get(a)
		vb, _ := tx.Get(b)
		tx.Set(a, vb)
		tx.Set(b, va)
		ha, hb := binary.BigEndian.AppendUint64([]byte("l/n/\x00"), 2), binary.BigEndian.AppendUint64([]byte("l/n/\x00"), 3)
		xa, _ := tx.Get(ha)
		xb, _ := tx.Get(hb)
		tx.Set(ha, xb)
		return tx.Set(hb, xa)
	})
	anyProblem(t, r, "do not hash to checkpoint")
}

func TestLogCatchesForgedCheckpoint(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, _, _ []string) error {
		return tx.Iterate([]byte("l/cp/"), true, func(k, v []byte) error {
			return tx.Set(append([]byte(nil), k...), []byte(strings.Replace(string(v), `"root":"`, `"root":"00`, 1)))
		})
	})
	anyProblem(t, r, "bad signature")
}

func TestLogCatchesRewrittenDecisionInput(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, _, decisions []string) error {
		return tx.Set([]byte("dec/gi/"+decisions[0]), []byte(`{"justification":[]}`))
	})
	anyProblem(t, r, "input was rewritten")
}

// TestProofBoundaries: a checkpoint proves the last leaf it covers and not
// the first after it (that one needs a newer checkpoint), and a checkpoint is
// consistent with itself, never with a newer one read backwards.
func TestProofBoundaries(t *testing.T) {
	w, ids, decisions := logWorld(t, 21)
	g := hatch.Log(w.E)
	cps, _ := g.Checkpoints()
	size := cps[0].Size
	at := map[uint64]string{}
	for _, id := range append(append([]string{}, ids...), decisions...) {
		p, err := g.Prove(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		at[p.Index] = id
	}
	last, first := at[size-1], at[size]
	if last == "" || first == "" {
		t.Fatalf("no entry or decision logged at %d or %d", size-1, size)
	}
	if p, err := g.Prove(last, size); err != nil || p.Verify() != nil {
		t.Fatalf("the last leaf of checkpoint %d: %v", size, err)
	}
	if _, err := g.Prove(first, size); !errors.Is(err, tlog.ErrNoCheckpoint) {
		t.Fatalf("the first leaf after checkpoint %d: %v", size, err)
	}
	if c, err := g.Consistency(size, size); err != nil || c.Verify() != nil {
		t.Fatalf("a checkpoint with itself: %v", err)
	}
	if _, err := g.Consistency(cps[1].Size, size); !errors.Is(err, tlog.ErrMalformed) {
		t.Fatalf("backwards: %v", err)
	}
}

// TestVerifyAgainstCheckpointsKeptElsewhere: the log extends the checkpoints
// it signed; a checkpoint of the same size over another tree (a fork, signed
// by the operator) is named.
func TestVerifyAgainstCheckpointsKeptElsewhere(t *testing.T) {
	w, _, _ := logWorld(t, 12)
	cps, _ := hatch.Log(w.E).Checkpoints()
	if r, err := w.E.Log().VerifyCheckpoints(t.Context(), cps); err != nil || !r.OK() {
		t.Fatalf("its own checkpoints: %+v %v", r, err)
	}
	fork, err := tlog.SignCheckpoint(w.Operator, cps[0].Size, strings.Repeat("ab", 32), w.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.E.Log().VerifyCheckpoints(t.Context(), []tlog.Checkpoint{*fork})
	if err != nil {
		t.Fatal(err)
	}
	anyProblem(t, r, "not an extension of the checkpoint kept elsewhere")
}

// TestLogCatchesTruncatedLog: the last leaf deleted, as by a writer who
// deletes the last decision from the log, is caught by the log's state.
func TestLogCatchesTruncatedLog(t *testing.T) {
	r := tamperLog(t, func(tx *store.Txn, _, _ []string) error {
		var last []byte
		if err := tx.Iterate([]byte("l/leaf/"), false, func(k, _ []byte) error {
			last = append([]byte(nil), k...)
			return nil
		}); err != nil {
			return err
		}
		return tx.Delete(last)
	})
	anyProblem(t, r, "the log says it has")
}
