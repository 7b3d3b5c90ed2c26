package gate

import (
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// TestInputUntrustedRoots: each entry's untrusted roots are in the policy
// input with their principal, tier, strength and distance in hops (the
// path's edges: 0 for an untrusted entry itself), which an operator's
// policy may read; the path itself is not.
func TestInputUntrustedRoots(t *testing.T) {
	g := benchGate(&testing.B{})
	f, st := benchFacts(2)
	ids := []string{st.Parents[0].ID, st.Parents[1].ID}
	root := strings.Repeat("e", 64)
	f.Sources[ids[0]] = []lineage.Source{{ID: root, Principal: "tool:mail", Tier: registry.External, Path: []string{ids[0], "m", root}, Strong: true}}
	f.Sources[ids[1]] = []lineage.Source{{ID: ids[1], Principal: "tool:mail", Tier: registry.Unverified, Path: []string{ids[1]}, Strong: false}}
	in, _, err := g.input(f, g.NewDecision(st, f.Call.ID, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	just := in.(ast.Object).Get(ast.StringTerm("justification")).Value.(*ast.Array)
	for i, want := range []string{
		`[{"hops": 2, "id": "` + root + `", "principal": "tool:mail", "strong": true, "tier": "external"}]`,
		`[{"hops": 0, "id": "` + ids[1] + `", "principal": "tool:mail", "strong": false, "tier": "unverified"}]`,
	} {
		got := just.Elem(i).Value.(ast.Object).Get(ast.StringTerm("untrusted"))
		if !got.Equal(ast.MustParseTerm(want)) {
			t.Errorf("entry %d: untrusted %v, want %s", i, got, want)
		}
	}
}
