package tampertest

import (
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
)

// TestRebuiltLogIsNamed: an attacker without keys rebuilds the store from
// its own bytes (Rebuild), dropping a deny from the middle of the log or
// rewriting it as an allow, with every sequence, index, subtree hash and
// trajectory recomputed and the checkpoints deleted. verify names the
// leaves the engine did not sign as they stand. The same rebuild with no
// edit verifies: the harness rebuilds faithfully, and it is the engine's
// signature that tells.
func TestRebuiltLogIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(deny string) Edit
		want string
	}{
		{"no edit", func(string) Edit { return Edit{} }, ""},
		{"a deny dropped", func(d string) Edit { return Edit{Drop: map[string]bool{d: true}} }, "engine signed"},
		{"a deny rewritten as allow", func(d string) Edit { return Edit{Allow: map[string]bool{d: true}} }, "engine signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := build(t)
			w.SkipVerify = true
			// A deny in the middle of the log, that no approval names.
			ds, err := w.E.Decisions(t.Context(), pedigree.DecisionQuery{Session: "s1"})
			if err != nil {
				t.Fatal(err)
			}
			// Read back one at a time, each with its whole justification
			// (a context named by reference expanded).
			whole := func(id string) []string {
				d, err := w.E.Decision(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				j, err := d.Whole()
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
			tainted, first := whole(ds[len(ds)-1].ID), whole(ds[0].ID)
			deny := w.Check("agent:planner", pedigree.Call{Session: "s3", Tool: "send_money", Args: []byte(`{"to":"999-666"}`), Justification: tainted})
			if deny.Decision != gate.Deny {
				t.Fatalf("the tainted send: %s", deny.Decision)
			}
			w.Record("user:alice", "s3", "later", nil)
			w.Check("agent:planner", pedigree.Call{Session: "s1", Tool: "lookup", Args: []byte(`{}`), Justification: first})
			w.E.Close()
			w.E = nil
			if _, err := Rebuild(t.Context(), w.Dir, tc.edit(deny.ID)); err != nil {
				t.Fatal(err)
			}
			if err := w.Reopen(); err != nil {
				t.Fatal(err)
			}
			r, err := w.E.Verify(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, p := range r.Problems {
				all = append(all, p.What)
			}
			got := strings.Join(all, "\n")
			if tc.want == "" {
				if !r.OK() {
					t.Fatalf("the faithful rebuild does not verify:\n%s", got)
				}
				return
			}
			if r.OK() || !strings.Contains(got, tc.want) {
				t.Fatalf("verify after %s: want %q, got:\n%s", tc.name, tc.want, got)
			}
		})
	}
}
