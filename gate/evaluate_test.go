package gate

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Decide leaves the input unencoded until Encode (a dry run never pays for
// it); Encode fills it in once, the same bytes whenever it is called, and
// two decisions on the same facts decide alike.
func TestDecideThenEncode(t *testing.T) {
	g, err := New(context.Background(), WithCatalog(&Catalog{Tools: map[string]Tool{"bench_send": {Irreversible: true, ExternalSink: true}}}))
	if err != nil {
		t.Fatal(err)
	}
	f, st := benchFacts(3)
	now := time.Now()
	want := g.NewDecision(st, f.Call.ID, now)
	first, err := g.Decide(context.Background(), f, want, now)
	if err != nil || first.Input != nil {
		t.Fatalf("decide encoded the input, or failed: %v", err)
	}
	if err := first.Encode(); err != nil || first.Input == nil {
		t.Fatalf("encode: %v", err)
	}
	f, st = benchFacts(3) // (the input appends the call to the facts' trajectory)
	got := g.NewDecision(st, f.Call.ID, now)
	ev, err := g.Decide(context.Background(), f, got, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Decision != want.Decision || !slices.Equal(got.Reasons, want.Reasons) {
		t.Fatalf("decided %s %v, then %s %v", got.Decision, got.Reasons, want.Decision, want.Reasons)
	}
	for range 2 {
		if err := ev.Encode(); err != nil || !bytes.Equal(ev.Input, first.Input) {
			t.Fatalf("encoded %s, want %s (%v)", ev.Input, first.Input, err)
		}
	}
	if err := (&Evaluation{}).Encode(); err != nil {
		t.Fatal("an evaluation without an input:", err)
	}
}

// A policy that cannot decide is an error of Decide, with the input still
// there to encode: the caller logs the deny it fails closed to with what the
// policy saw.
func TestDecideErrorKeepsInput(t *testing.T) {
	p, err := ReplacementPolicyFromDir(filepath.Join("..", "testdata", "policies", "undefined"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(context.Background(), WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	f, st := benchFacts(2)
	st.Args = []byte(`{"probe_marker":true,"to":"x@example.org"}`) // the policy is undefined for it
	now := time.Now()
	ev, err := g.Decide(context.Background(), f, g.NewDecision(st, f.Call.ID, now), now)
	if err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("an undefined decision: %v", err)
	}
	if eerr := ev.Encode(); eerr != nil {
		t.Fatal(eerr)
	}
	if ev == nil || !bytes.Contains(ev.Input, []byte(`"justification":[`)) {
		t.Fatalf("the input of a failed decision was not encoded: %+v", ev)
	}
}
