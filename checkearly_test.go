package pedigree_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// earlyCatalog: read_docs is not sensitive, send_money is (and unknown
// tools are).
func earlyCatalog() *gate.Catalog {
	no := false
	return &gate.Catalog{Tools: map[string]gate.Tool{
		"read_docs":  {Sensitive: &no},
		"send_money": {Irreversible: true, ExternalSink: true},
	}}
}

// CheckEarly returns an allow of a tool that is not sensitive before it is
// stored, and stored reports the commit; everything else (a sensitive
// allow, a deny, an unknown tool) is in the decision log when CheckEarly
// returns, with no commit left to wait for. The world's cleanup verifies
// the store.
func TestCheckEarly(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithCatalog(earlyCatalog()))
	ctx := t.Context()
	prompt := w.Record("user:alice", "s1", "pay bob 10", nil)
	mail := w.Record("tool:gmail_read", "s1", "pay eve 999", nil)
	signer := w.Keys["agent:planner"]
	call := func(tool string, just ...string) pedigree.Call {
		return pedigree.Call{Principal: "agent:planner", Session: "s1", Tool: tool, Args: []byte(`{"to":"bob"}`), Justification: just}
	}

	d, stored, err := w.E.CheckEarly(ctx, signer, call("read_docs", mail.ID))
	if err != nil || d.Decision != gate.Allow || stored == nil {
		t.Fatalf("a read justified by mail: %v %v (early: %v)", d, err, stored != nil)
	}
	if err := stored(); err != nil {
		t.Fatal(err)
	}
	if err := stored(); err != nil {
		t.Fatal("stored a second time:", err)
	}
	if got, err := w.E.Decision(ctx, d.ID); err != nil || got.Decision != gate.Allow || got.CallID != d.CallID {
		t.Fatalf("the early allow once stored: %+v %v", got, err)
	}
	if _, err := w.E.Show(ctx, d.CallID); err != nil {
		t.Fatalf("the early allow's call entry: %v", err)
	}

	for _, c := range []struct {
		name string
		call pedigree.Call
		want gate.Outcome
	}{
		{"sensitive allow", call("send_money", prompt.ID), gate.Allow},
		{"sensitive deny", call("send_money", mail.ID), gate.Deny},
		{"unknown tool", call("wire_funds", prompt.ID), gate.Allow},
	} {
		d, stored, err := w.E.CheckEarly(ctx, signer, c.call)
		if err != nil || d.Decision != c.want {
			t.Fatalf("%s: %v %v", c.name, d, err)
		}
		if stored != nil {
			t.Fatalf("%s: returned with its commit still running", c.name)
		}
		if got, err := w.E.Decision(ctx, d.ID); err != nil || got.Decision != c.want {
			t.Fatalf("%s: not stored when CheckEarly returned: %+v %v", c.name, got, err)
		}
	}
}

// An allow bought with an approval is stored before CheckEarly returns,
// even for a tool that is not sensitive: an approval is single use, and
// only the commit says whether another check spent it first. (The default
// policy never asks about such a tool; an operator's policy may.)
func TestCheckEarlyWithApprovalStoresFirst(t *testing.T) {
	dir := t.TempDir()
	policy := `package pedigree.gate

import rego.v1

decision := {"decision": "allow", "reasons": ["approved"], "approval": input.approvals[0].id} if {
	count(input.approvals) > 0
} else := {"decision": "ask", "reasons": ["every call is asked about"]}
`
	if err := os.WriteFile(filepath.Join(dir, "ask.rego"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithCatalog(earlyCatalog()), pedigree.WithReplacementPolicyDir(dir))
	ctx := t.Context()
	prompt := w.Record("user:alice", "s1", "look it up", nil)
	c := pedigree.Call{Principal: "agent:planner", Session: "s1", Tool: "read_docs", Args: []byte(`{}`), Justification: []string{prompt.ID}}
	asked, stored, err := w.E.CheckEarly(ctx, w.Keys["agent:planner"], c)
	if err != nil || asked.Decision != gate.Ask || stored != nil {
		t.Fatalf("asked: %v %v (early: %v)", asked, err, stored != nil)
	}
	a, err := w.E.Approve(ctx, w.Keys["user:alice"], "user:alice", asked.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	d, stored, err := w.E.CheckEarly(ctx, w.Keys["agent:planner"], c)
	if err != nil || d.Decision != gate.Allow || d.Approval != a.ID {
		t.Fatalf("approved: %v %v", d, err)
	}
	if stored != nil {
		t.Fatal("an allow that spent an approval returned with its commit still running")
	}
	if got, err := w.E.Decision(ctx, d.ID); err != nil || got.Approval != a.ID {
		t.Fatalf("an allow that spent an approval was not stored when CheckEarly returned: %+v %v", got, err)
	}
}

// Early allows and ordinary checks of one session, at once: every commit
// lands, the session's trajectory holds every call, and the store verifies
// (the world's cleanup runs verify), whatever order the commits take.
func TestCheckEarlyConcurrent(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithCatalog(earlyCatalog()))
	ctx := t.Context()
	prompt := w.Record("user:alice", "s1", "read, then pay bob", nil)
	signer := w.Keys["agent:planner"]
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			tool := "read_docs"
			if i%4 == 0 {
				tool = "send_money"
			}
			c := pedigree.Call{Principal: "agent:planner", Session: "s1", Tool: tool, Args: []byte(fmt.Sprintf(`{"i":%d}`, i)), Justification: []string{prompt.ID}}
			d, stored, err := w.E.CheckEarly(ctx, signer, c)
			if err == nil && stored != nil {
				err = stored()
			}
			if err == nil && d.Decision != gate.Allow {
				err = fmt.Errorf("%s: %s %v", tool, d.Decision, d.Reasons)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	tr, err := w.E.Trajectory(ctx, "s1")
	if err != nil || tr.Len != 16 {
		t.Fatalf("the session's trajectory after 16 checks: %+v %v", tr, err)
	}
}
