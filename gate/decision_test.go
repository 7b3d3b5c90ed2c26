package gate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/lineage"
)

// TestNewDecisionJustification: a decision's justification is every parent
// of its call (Statement.AllParents). A call naming its context by
// reference that the graph has not resolved (refused before it was read)
// has no known parents: its decision lists the parents it lists, and the
// engine denies it; it is never read as resting on nothing at all.
func TestNewDecisionJustification(t *testing.T) {
	g := benchGate(&testing.B{})
	_, st := benchFacts(3)
	d := g.NewDecision(st, strings.Repeat("c", 64), time.Now())
	if want := []string{st.Parents[0].ID, st.Parents[1].ID, st.Parents[2].ID}; !slices.Equal(d.Justification, want) {
		t.Fatalf("justification %v, want %v", d.Justification, want)
	}
	ref := *st
	ref.Version, ref.Parents = 2, st.Parents[2:]
	ref.Context = &lineage.ContextRef{N: 2, Head: strings.Repeat("a", 64)}
	if _, err := ref.AllParents(); err == nil {
		t.Fatal("an unresolved reference has known parents")
	}
	d = g.NewDecision(&ref, strings.Repeat("c", 64), time.Now())
	if !slices.Equal(d.Justification, []string{st.Parents[2].ID}) {
		t.Fatalf("an unresolved reference's justification: %v", d.Justification)
	}
}
