package pedigree_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// TestSingleUseSurvivesDeletedRows: a writer of the data directory without
// keys deletes, one at a time, each row that records or locates an
// approval's use (the use row dec/au/, the using decision's record, its
// log leaf, its place in the append order, the approval's log index) and
// retries the approved call: each deletion costs at most a denial, never a
// second allow. Before, deleting dec/au/<approval> alone allowed the call
// again.
func TestSingleUseSurvivesDeletedRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		del  func(tx *store.Txn, approval, use string, leaf uint64) error
	}{
		{"the use row dec/au", func(tx *store.Txn, a, _ string, _ uint64) error {
			return tx.In(store.Decisions).Delete([]byte("au/" + a))
		}},
		{"the using decision's record", func(tx *store.Txn, a, u string, _ uint64) error {
			if err := tx.In(store.Decisions).Delete([]byte("au/" + a)); err != nil {
				return err
			}
			return tx.In(store.Decisions).Delete([]byte("g/" + u))
		}},
		{"the using decision's leaf", func(tx *store.Txn, a, _ string, leaf uint64) error {
			if err := tx.In(store.Decisions).Delete([]byte("au/" + a)); err != nil {
				return err
			}
			return tx.In(store.Log).Delete(binary.BigEndian.AppendUint64([]byte("leaf/"), leaf))
		}},
		{"the approval's log index", func(tx *store.Txn, a, _ string, _ uint64) error {
			if err := tx.In(store.Decisions).Delete([]byte("au/" + a)); err != nil {
				return err
			}
			return tx.In(store.Log).Delete([]byte("i/e" + a))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := enginetest.NewOnDisk(t, enginetest.Default)
			w.SkipVerify = true
			d, mem := deniedSession(t, w)
			a, err := w.E.Approve(t.Context(), w.Keys["user:alice"], "user:alice", d.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			use := sendAgain(w, "agent:planner", mem.ID)
			if use.Decision != gate.Allow || use.Approval != a.ID {
				t.Fatalf("the approved call: %s %v", use.Decision, use.Reasons)
			}
			w.Tamper(func(tx *store.Txn) error {
				i, err := tx.In(store.Log).Get([]byte("i/d" + use.ID))
				if err != nil {
					return err
				}
				return tc.del(tx, a.ID, use.ID, binary.BigEndian.Uint64(i))
			})
			if err := w.Reopen(); err != nil {
				return // refused at open: a denial
			}
			if again := sendAgain(w, "agent:planner", mem.ID); again.Decision == gate.Allow {
				t.Fatalf("the approval allowed a second call after %s was deleted: %v", tc.name, again.Reasons)
			}
		})
	}
}
