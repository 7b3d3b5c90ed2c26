package lineage_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
)

// orderWorld is a world with two sessions and two recalls, one of which
// puts entries of session t into s in its own order, one of them already
// there: s's context is a, b, e, c, d.
func orderWorld(t *testing.T) (*world, map[string]string, map[string]uint64) {
	t.Helper()
	w := newWorld(t)
	ids := map[string]string{}
	recallSeq := map[string]uint64{}
	ids["a"] = w.record("tool:gmail_read", "s", "a", nil).ID
	ids["b"] = w.record("user:alice", "s", "b", nil).ID
	ids["c"] = w.record("tool:gmail_read", "t", "c", nil).ID
	ids["e"] = w.record("tool:gmail_read", "t", "e", nil).ID
	recall := func(session string, members ...string) {
		var rs []string
		for _, m := range members {
			rs = append(rs, ids[m])
		}
		before := map[string]bool{}
		if err := w.space().View(func(tx kv.Txn) error {
			return tx.Iterate([]byte("r/"), false, func(k, _ []byte) error { before[string(k[2:])] = true; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		if err := w.recall(session, rs...); err != nil {
			t.Fatal(err)
		}
		// The engine logs a recall record as a leaf of its own, between
		// the entries' leaves: it takes the next sequence.
		w.seq++
		if err := w.space().View(func(tx kv.Txn) error {
			return tx.Iterate([]byte("r/"), false, func(k, _ []byte) error {
				if id := string(k[2:]); !before[id] {
					recallSeq[id] = w.seq
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
	}
	recall("s", "e", "a", "c")
	ids["d"] = w.record("agent:planner", "s", "d", nil).ID
	if got, want := w.contextOf("s"), []string{ids["a"], ids["b"], ids["e"], ids["c"], ids["d"]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("context of s: %v, want %v", got, want)
	}
	return w, ids, recallSeq
}

func (w *world) contextOf(session string) []string {
	w.t.Helper()
	ids, err := w.fresh().Context(w.t.Context(), session)
	if err != nil {
		w.t.Fatal(err)
	}
	return ids
}

// verifyOrder runs VerifyIn and VerifyContextOrder over the store, and
// returns what each found.
func verifyOrder(t *testing.T, w *world, recallSeq map[string]uint64) (in, order []lineage.Problem) {
	t.Helper()
	if err := w.space().View(func(tx kv.Txn) error {
		g := w.fresh()
		v, err := g.VerifyIn(t.Context(), tx, func(id, f string, a ...any) {
			in = append(in, lineage.Problem{ID: id, What: fmt.Sprintf(f, a...)})
		})
		if err != nil {
			return err
		}
		return g.VerifyContextOrder(t.Context(), tx, v, recallSeq, func(id, f string, a ...any) {
			order = append(order, lineage.Problem{ID: id, What: fmt.Sprintf(f, a...)})
		})
	}); err != nil {
		t.Fatal(err)
	}
	return in, order
}

// setRows rewrites session's context rows to ids (row n holds ids[n]) and
// its head to the hash chain over them: what someone who can write the
// store can do, since neither the rows nor the head are signed.
func setRows(tx kv.Txn, session string, ids []string) error {
	var old [][]byte
	if err := tx.Iterate([]byte("s/"+session+"\x00"), false, func(k, _ []byte) error {
		old = append(old, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	var chain [32]byte
	for n, id := range ids {
		if err := tx.Set(binary.BigEndian.AppendUint64([]byte("s/"+session+"\x00"), uint64(n)), []byte(id)); err != nil {
			return err
		}
		chain = sha256.Sum256(append(chain[:], id...))
	}
	return tx.Set([]byte("h/"+session), append(binary.BigEndian.AppendUint64(nil, uint64(len(ids))), chain[:]...))
}

func TestVerifyContextOrder(t *testing.T) {
	w, _, recallSeq := orderWorld(t)
	if in, order := verifyOrder(t, w, recallSeq); len(in)+len(order) != 0 {
		t.Fatalf("an untouched store: %+v %+v", in, order)
	}
}

// TestVerifyContextReordered swaps context rows and rewrites the head to
// match: the context still reads (its rows hash to its head) and is the
// same set, so only the order check finds it: an entry's own row moved
// past a recall's, and two rows of one recall swapped.
func TestVerifyContextReordered(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rows      []string
		at, there string
		pos       int
	}{
		{"entry past a recall", []string{"a", "e", "b", "c", "d"}, "e", "b", 1},
		{"within a recall", []string{"a", "b", "c", "e", "d"}, "c", "e", 2},
		{"last two", []string{"a", "b", "e", "d", "c"}, "d", "c", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ids, recallSeq := orderWorld(t)
			var rows []string
			for _, r := range tc.rows {
				rows = append(rows, ids[r])
			}
			w.tamper(func(tx kv.Txn) error { return setRows(tx, "s", rows) })
			if got := w.contextOf("s"); fmt.Sprint(got) != fmt.Sprint(rows) {
				t.Fatalf("the reordered context reads %v, want %v", got, rows)
			}
			in, order := verifyOrder(t, w, recallSeq)
			if len(in) != 0 {
				t.Fatalf("VerifyIn, which compares sets: %+v", in)
			}
			want := fmt.Sprintf("context row %d of session s names this entry, the log's order puts %s there: context rows were reordered", tc.pos, ids[tc.there])
			if len(order) != 1 || order[0].ID != ids[tc.at] || order[0].What != want {
				t.Fatalf("order problems %+v, want one on %s: %q", order, ids[tc.at], want)
			}
		})
	}
}

// TestVerifyContextOrderLeavesOtherProblems: a context that differs from
// the derived one as a set (a row dropped, or one entry named twice), or
// whose recall the log does not hold, is not reported as reordered: the
// set check and the log check name it.
func TestVerifyContextOrderLeavesOtherProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   []string
		noSeq  bool
		wantIn bool
	}{
		{"dropped", []string{"a", "b", "e", "d"}, false, true},
		{"dropped and reordered", []string{"b", "a", "e", "d"}, false, true},
		{"named twice", []string{"a", "b", "e", "e", "d"}, false, true},
		{"recall not logged", []string{"a", "e", "b", "c", "d"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ids, recallSeq := orderWorld(t)
			var rows []string
			for _, r := range tc.rows {
				rows = append(rows, ids[r])
			}
			w.tamper(func(tx kv.Txn) error { return setRows(tx, "s", rows) })
			if tc.noSeq {
				recallSeq = nil
			}
			in, order := verifyOrder(t, w, recallSeq)
			if len(order) != 0 || (len(in) != 0) != tc.wantIn {
				t.Fatalf("VerifyIn %+v; order %+v", in, order)
			}
		})
	}
}
