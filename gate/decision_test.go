package gate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/lineage"
)

// TestNewDecisionJustification: a decision's justification is every parent
// of its call (Whole). A call that names its context by reference is
// recorded so (a version 2 decision: the reference, then the parents it
// lists), and decided on every parent once the graph resolved it. One that
// the graph has not resolved (refused before it was read) has no known
// parents (lineage.ErrUnexpanded): the engine denies it; it is never read as
// resting on its listed parents alone.
func TestNewDecisionJustification(t *testing.T) {
	g := benchGate(&testing.B{})
	_, st := benchFacts(3)
	all := []string{st.Parents[0].ID, st.Parents[1].ID, st.Parents[2].ID}
	d := g.NewDecision(st, strings.Repeat("c", 64), time.Now())
	if whole, err := d.Whole(); err != nil || !slices.Equal(d.Justification, all) || !slices.Equal(whole, all) || d.Context != nil || d.Version != 1 {
		t.Fatalf("justification %v (whole %v, %v), want %v", d.Justification, whole, err, all)
	}
	ref := *st
	ref.Version, ref.Parents = 2, st.Parents[2:]
	ref.Context = &lineage.ContextRef{N: 2, Head: strings.Repeat("a", 64)}
	if _, err := ref.AllParents(); err == nil {
		t.Fatal("an unresolved reference has known parents")
	}
	d = g.NewDecision(&ref, strings.Repeat("c", 64), time.Now())
	if !slices.Equal(d.Justification, []string{st.Parents[2].ID}) || d.Context == nil || *d.Context != *ref.Context || d.Version != 2 {
		t.Fatalf("an unresolved reference's decision: %d %+v %v", d.Version, d.Context, d.Justification)
	}
	if whole, err := d.Whole(); !errors.Is(err, lineage.ErrUnexpanded) {
		t.Fatalf("an unresolved reference's whole justification: %v, %v", whole, err)
	}
	// The record keeps the reference, not the entries it names; SetWhole
	// (the engine, from the call) gives them back.
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), st.Parents[0].ID) || !strings.Contains(string(b), `"context":{"n":2,"head":"`+ref.Context.Head+`"}`) {
		t.Fatalf("the record: %s", b)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := back.Whole(); !errors.Is(err, lineage.ErrUnexpanded) {
		t.Fatalf("a decision read back knows its whole justification: %v", err)
	}
	back.SetWhole(all[:2])
	if whole, err := back.Whole(); err != nil || !slices.Equal(whole, all) {
		t.Fatalf("set whole: %v, %v", whole, err)
	}
}
