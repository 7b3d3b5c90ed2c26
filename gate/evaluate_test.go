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

// Evaluate decides as Decide does without encoding the input; Encode then
// yields the bytes Decide logs, once.
func TestEvaluateThenEncode(t *testing.T) {
	g, err := New(context.Background(), WithCatalog(&Catalog{Tools: map[string]Tool{"bench_send": {Irreversible: true, ExternalSink: true}}}))
	if err != nil {
		t.Fatal(err)
	}
	f, st := benchFacts(3)
	now := time.Now()
	want := g.NewDecision(st, f.Call.ID, now)
	logged, err := g.Decide(context.Background(), f, want, now)
	if err != nil || logged.Input == nil {
		t.Fatalf("decide: %v %v", logged, err)
	}
	f, st = benchFacts(3) // (the input appends the call to the facts' trajectory)
	got := g.NewDecision(st, f.Call.ID, now)
	ev, err := g.Evaluate(context.Background(), f, got, now)
	if err != nil || ev.Input != nil {
		t.Fatalf("evaluate encoded the input, or failed: %v", err)
	}
	if got.Decision != want.Decision || !slices.Equal(got.Reasons, want.Reasons) {
		t.Fatalf("evaluate decided %s %v, decide %s %v", got.Decision, got.Reasons, want.Decision, want.Reasons)
	}
	for range 2 {
		if err := ev.Encode(); err != nil || !bytes.Equal(ev.Input, logged.Input) {
			t.Fatalf("encoded %s, want %s (%v)", ev.Input, logged.Input, err)
		}
	}
	if err := (&Evaluation{}).Encode(); err != nil {
		t.Fatal("an evaluation without an input:", err)
	}
}

// A policy that cannot decide is an error of Decide, with the input still
// encoded: the caller logs the deny it fails closed to with what the policy
// saw.
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
	if ev == nil || !bytes.Contains(ev.Input, []byte(`"justification":[`)) {
		t.Fatalf("the input of a failed decision was not encoded: %+v", ev)
	}
}
