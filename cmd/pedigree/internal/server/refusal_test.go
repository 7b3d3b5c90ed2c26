package server_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// Item 17 through the server: a forged signature is refused, logged in the
// refusal log (claimed principal, reason, payload digest), served by
// /v1/refusals and counted in /metrics.
func TestRefusedWritesLoggedAndCounted(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	h := server.New(w.E, nil).Handler()
	st, _ := w.E.Envelopes().Statement(t.Context(), pedigree.Entry{Principal: "agent:planner", Content: []byte("x"), Parents: []lineage.Parent{}})
	forged, _, _ := lineage.Sign(w.Keys["tool:gmail_read"], st) // the planner's name, the mail tool's key
	b, _ := json.Marshal(map[string]any{"envelope": json.RawMessage(forged)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/entries", bytes.NewReader(b)))
	if rec.Code != 403 {
		t.Fatalf("forged insert: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/refusals", nil))
	var out struct{ Refusals []pedigree.Refusal }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Refusals) != 1 {
		t.Fatalf("refusals: %s %v", rec.Body, err)
	}
	r := out.Refusals[0]
	if r.Principal != "agent:planner" || r.Kind != "bad_signature" || len(r.PayloadDigest) != 64 || strings.Contains(r.Reason, string(forged)) {
		t.Fatalf("refusal %+v", r)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "pedigree_refused_writes_total 1") {
		t.Fatalf("metrics:\n%s", rec.Body)
	}
}
