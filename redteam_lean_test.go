package pedigree_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// A decision made by the default policy logs its lean input: the
// justification lists only its untrusted entries. An operator who then
// adds an extension and re-evaluates the log, to learn what the new policy
// would have decided, gets the extension evaluated on that trimmed input:
// a rule that reads the trusted entries (here: a payment must rest on a
// user's instruction) finds none and denies, though the same call checked
// under the extension, on its whole justification, is allowed. The
// re-evaluation's answer differs from the policy's on the untrimmed input.
func TestRedTeamReevaluateOfALeanInputUnderAnExtension(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.Record("user:alice", "s", "pay my bill to 123-456", nil)
	call := pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "send_money", Args: []byte(`{"to":"123-456"}`)}
	logged := w.Check("agent:planner", call)
	if logged.Decision != gate.Allow {
		t.Fatalf("the default policy on a user's instruction: %+v", logged)
	}

	ext := t.TempDir()
	rule := "package pedigree.ext\n\nimport rego.v1\n\n" +
		"deny contains \"a payment rests on no user's instruction\" if {\n" +
		"\tinput.action.tool == \"send_money\"\n" +
		"\tnot user_instructed\n}\n\n" +
		"user_instructed if {\n\tsome e in input.justification\n\te.tier == \"user\"\n}\n"
	if err := os.WriteFile(filepath.Join(ext, "ext.rego"), []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	w.E.Close()
	e, err := pedigree.Open(t.Context(), w.Dir, pedigree.WithClock(w.Clock.Now), pedigree.WithPolicyDir(ext))
	if err != nil {
		t.Fatal(err)
	}
	w.E = e
	fresh := w.Check("agent:planner", call)
	if fresh.Decision != gate.Allow {
		t.Fatalf("the extension on the whole justification: %+v", fresh)
	}
	r, err := e.Reevaluate(t.Context(), logged.ID)
	if err != nil {
		// Refusing to re-evaluate a trimmed input under a policy that
		// reads every entry is a correct answer too.
		t.Logf("re-evaluation refused: %v", err)
		return
	}
	if r.Decision != fresh.Decision {
		t.Fatalf("re-evaluated under the extension: %s %q; the extension on the whole justification: %s %q",
			r.Decision, r.Reasons, fresh.Decision, fresh.Reasons)
	}
}

// gate.WholeInput gives a lean logged input back the entries it left out:
// on random DAGs, the lean input made whole is the input of a policy that
// reads every entry, on the same facts (but the call's ID: the two previews
// are a millisecond apart).
func TestWholeInputIsTheInputThatListsEveryEntry(t *testing.T) {
	cat, err := gate.ParseCatalog([]byte(leanCatalog))
	if err != nil {
		t.Fatal(err)
	}
	ext := t.TempDir()
	noop := "package pedigree.ext\n\nimport rego.v1\n\ndeny contains \"never\" if input.no_such_field == true\n"
	if err := os.WriteFile(filepath.Join(ext, "noop.rego"), []byte(noop), 0o600); err != nil {
		t.Fatal(err)
	}
	whole, err := gate.PolicyFromDir(ext)
	if err != nil {
		t.Fatal(err)
	}
	full, err := gate.New(t.Context(), gate.WithCatalog(cat), gate.WithPolicy(whole))
	if err != nil {
		t.Fatal(err)
	}
	lean, err := gate.New(t.Context(), gate.WithCatalog(cat))
	if err != nil {
		t.Fatal(err)
	}
	who := []string{"user:alice", "agent:planner", "tool:gmail_read", "tool:web_fetch", "tool:calculator"}
	tools := []string{"send", "send_asks", "email_send", "all_open", "lookup"}
	trimmed := 0
	for seed := range 4 {
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		w := enginetest.New(t, enginetest.Default, pedigree.WithCatalog(cat))
		var ids []string
		for i := range 30 {
			var parents []lineage.Parent
			if len(ids) > 0 && r.IntN(2) == 0 {
				parents = enginetest.Strong(ids[r.IntN(len(ids))])
			}
			ids = append(ids, w.Record(who[r.IntN(len(who))], "s", fmt.Sprint(seed, i), parents).ID)
			c := pedigree.Call{Principal: "agent:planner", Session: "s", Tool: tools[r.IntN(len(tools))], Args: []byte(`{"to":"acct-1","memo":"m"}`)}
			if r.IntN(3) == 0 {
				c.ArgSources = map[string][]string{"memo": {ids[r.IntN(len(ids))]}}
			}
			a, ain, err := w.E.PreviewWith(t.Context(), lean, c)
			if err != nil {
				t.Fatal(err)
			}
			_, bin, err := w.E.PreviewWith(t.Context(), full, c)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := a.Whole()
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := w.E.Nodes(whole)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gate.WholeInput(ain, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if len(ain) < len(bin) {
				trimmed++
			}
			var g, want map[string]any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(bin, &want); err != nil {
				t.Fatal(err)
			}
			g["action"].(map[string]any)["call_id"] = nil
			want["action"].(map[string]any)["call_id"] = nil
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("seed %d call %d: the lean input made whole:\n%s\nthe whole input:\n%s", seed, i, got, bin)
			}
		}
	}
	if trimmed < 20 {
		t.Fatalf("only %d lean inputs were shorter: the worlds test little", trimmed)
	}
}
