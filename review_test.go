package pedigree_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// TestReviewsThroughTheLibrary: pending, reject and approve on the engine,
// and a review row rewritten or deleted behind its back is caught.
func TestReviewsThroughTheLibrary(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.SkipVerify = true
	ctx := t.Context()
	email := w.Record("tool:gmail_read", "s", "pay 999", nil)
	call := func(to string) *gate.Decision {
		return w.Check("agent:planner", pedigree.Call{Session: "s", Tool: "pay", Args: []byte(`{"to":"` + to + `"}`), Justification: []string{email.ID}})
	}
	first, second := call("999"), call("998")
	ps, err := w.E.Pending(ctx)
	if err != nil || len(ps) != 2 || ps[0].DecisionID != second.ID || ps[1].DecisionID != first.ID {
		t.Fatalf("pending: %v %+v", err, ps)
	}
	if _, err := w.E.Reject(ctx, w.Keys["user:alice"], "user:alice", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.E.Approve(ctx, w.Keys["user:alice"], "user:alice", first.ID, 0); !errors.Is(err, gate.ErrRejected) {
		t.Fatalf("approve after reject: %v", err)
	}
	if _, err := w.E.Reject(ctx, w.Keys["agent:planner"], "agent:planner", second.ID); !errors.Is(err, gate.ErrApproval) {
		t.Fatalf("the agent rejected: %v", err)
	}
	if _, err := w.E.Approve(ctx, w.Keys["user:alice"], "user:alice", second.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.E.Reject(ctx, w.Keys["user:alice"], "user:alice", second.ID); err == nil {
		t.Fatal("an approved decision was rejected")
	}
	if ps, _ := w.E.Pending(ctx); len(ps) != 0 {
		t.Fatalf("still pending: %+v", ps)
	}
	rs, err := w.E.Reviews(ctx)
	if err != nil || len(rs) != 2 || rs[0].Outcome != gate.Rejected || rs[1].Outcome != gate.Approved {
		t.Fatalf("reviews: %v %+v", err, rs)
	}
	if rep, err := w.E.Verify(ctx); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify: %v %+v", err, rep)
	}

	// Deleting the rejection's row would make the decision approvable
	// again: verify names it.
	w.Tamper(func(t *store.Txn) error { return t.In(store.Decisions).Delete([]byte("gr/" + first.ID)) })
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	rep, err := w.E.Verify(ctx)
	if err != nil || !problem(rep.Problems, "has no review row") {
		t.Fatalf("deleted review row: %v %+v", err, rep)
	}
	// A row rewritten to name another reviewer is refused at use.
	w.Tamper(func(t *store.Txn) error {
		return t.In(store.Decisions).Set([]byte("gr/"+second.ID), []byte(`{"decision_id":"`+second.ID+`","outcome":"approved","entry":"`+rs[1].Entry+`","by":"user:mallory","time":"`+rs[1].Time+`"}`))
	})
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.E.Reviews(ctx); !errors.Is(err, gate.ErrReviewTampered) {
		t.Fatalf("rewritten review row: %v", err)
	}
}

func problem(ps []lineage.Problem, what string) bool {
	for _, p := range ps {
		if strings.Contains(p.What, what) {
			return true
		}
	}
	return false
}
