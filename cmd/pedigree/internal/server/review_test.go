package server_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// TestReviewRoutes: pending, rejections and reviews over HTTP, and the
// gauges that count them.
func TestReviewRoutes(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	h := server.New(w.E, nil).Handler()
	ctx := t.Context()
	do := func(method, path string, body any) (int, []byte) {
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, rd))
		return rec.Code, rec.Body.Bytes()
	}
	email := w.Record("tool:gmail_read", "s", "pay 999", nil)
	cst, srcs, _ := w.E.Envelopes().CallStatement(ctx, pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "pay", Args: []byte(`{"to":"999"}`), Justification: []string{email.ID}})
	call, _, _ := lineage.Sign(w.Keys["agent:planner"], cst)
	code, body := do("POST", "/v1/check", map[string]any{"call": json.RawMessage(call), "arg_sources": srcs})
	var d gate.Decision
	if code != 200 || json.Unmarshal(body, &d) != nil || d.Decision != gate.Deny {
		t.Fatalf("check: %d %s", code, body)
	}
	var pending struct{ Pending []gate.Pending }
	if code, body := do("GET", "/v1/pending", nil); code != 200 || json.Unmarshal(body, &pending) != nil || len(pending.Pending) != 1 ||
		pending.Pending[0].DecisionID != d.ID || string(pending.Pending[0].Args) != `{"to":"999"}` {
		t.Fatalf("pending: %d %s", code, body)
	}
	_, m := do("GET", "/metrics", nil)
	if !strings.Contains(string(m), `pedigree_decisions_reviewed{state="pending"} 1`) {
		t.Fatalf("metrics lack the pending gauge:\n%s", m)
	}

	// Bad rejections change nothing.
	approval, _, _ := lineage.Sign(w.Keys["user:alice"], pedigree.BuildApproval(&d, "user:alice", time.Minute, w.Clock.Now()))
	byAgent, _, _ := lineage.Sign(w.Keys["agent:planner"], pedigree.BuildRejection(&d, "agent:planner", w.Clock.Now()))
	other := d
	other.Session = "elsewhere"
	wrongSession, _, _ := lineage.Sign(w.Keys["user:alice"], pedigree.BuildRejection(&other, "user:alice", w.Clock.Now()))
	for name, env := range map[string][]byte{"an approval": approval, "signed by the agent": byAgent, "another session": wrongSession, "garbage": []byte(`{}`)} {
		if code, body := do("POST", "/v1/rejections", map[string]any{"envelope": json.RawMessage(env)}); code < 400 {
			t.Errorf("rejection %s: %d %s", name, code, body)
		}
	}
	rej, _, _ := lineage.Sign(w.Keys["user:alice"], pedigree.BuildRejection(&d, "user:alice", w.Clock.Now()))
	if code, body := do("POST", "/v1/rejections", map[string]any{"envelope": json.RawMessage(rej)}); code != 200 {
		t.Fatalf("rejection: %d %s", code, body)
	}
	// Rejected: no approval, no second rejection.
	if code, body := do("POST", "/v1/approvals", map[string]any{"envelope": json.RawMessage(approval)}); code != 409 || !strings.Contains(string(body), `"rejected"`) {
		t.Fatalf("approval after rejection: %d %s", code, body)
	}
	if code, _ := do("POST", "/v1/rejections", map[string]any{"envelope": json.RawMessage(rej)}); code < 400 {
		t.Fatalf("second rejection: %d", code)
	}
	var reviews struct{ Reviews []gate.Review }
	if code, body := do("GET", "/v1/reviews", nil); code != 200 || json.Unmarshal(body, &reviews) != nil || len(reviews.Reviews) != 1 ||
		reviews.Reviews[0].Outcome != gate.Rejected || reviews.Reviews[0].By != "user:alice" {
		t.Fatalf("reviews: %d %s", code, body)
	}
	_, m = do("GET", "/metrics", nil)
	for _, want := range []string{`pedigree_decisions_reviewed{state="pending"} 0`, `pedigree_decisions_reviewed{state="rejected"} 1`, `pedigree_decisions_reviewed{state="approved"} 0`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
