package pedigree_test

import (
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

// leanCatalog varies every field of a tool the default policy reads.
const leanCatalog = `tools:
  send: {sensitive: true, irreversible: true, args: {to: {trusted: true}, memo: {trusted: false}}}
  send_asks: {sensitive: true, ask_on_untrusted: true, args: {to: {trusted: true}, memo: {trusted: false}}}
  send_steer_allow: {sensitive: true, on_steered: allow, args: {to: {trusted: true}, memo: {trusted: false}}}
  send_steer_deny: {sensitive: true, on_steered: deny, args: {to: {trusted: true}, memo: {trusted: false}}}
  email_send: {sensitive: true, role: send, recipient_arg: to}
  all_open: {sensitive: true, args: {to: {trusted: false}, memo: {trusted: false}}}
  lookup: {sensitive: false}
`

// TestLeanJustificationDecidesAsTheWholeOne is the differential test of the
// lean policy input (gate.Gate.input): on random DAGs of entries by trusted
// and untrusted principals, joined by strong and weak edges across two
// sessions, every call, justified by its session's context or by a random
// set of entries, with random argument sources, gets the same decision,
// reasons, untrusted sources and warnings from the default policy given
// only the justification's entries with an untrusted label as from the same
// policy given every entry (an extension that adds nothing makes the gate
// list them all).
func TestLeanJustificationDecidesAsTheWholeOne(t *testing.T) {
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
	tools := []string{"send", "send_asks", "send_steer_allow", "send_steer_deny", "email_send", "all_open", "lookup", "not_in_catalog"}
	who := []string{"user:alice", "agent:planner", "tool:gmail_read", "tool:web_fetch", "tool:calculator", "user:mallory"}
	weights := []float64{1, 1, 0.1, 0.6}
	calls, shorter, differ := 0, 0, map[gate.Outcome]int{}
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 31))
		w := enginetest.New(t, enginetest.Default, pedigree.WithCatalog(cat))
		var ids []string
		pick := func(max int) []string {
			if len(ids) == 0 {
				return nil
			}
			var out []string
			for range 1 + r.IntN(max) {
				out = append(out, ids[r.IntN(len(ids))])
			}
			return out
		}
		for i := range 30 + r.IntN(30) {
			session := fmt.Sprintf("s%d", r.IntN(2))
			var parents []lineage.Parent
			if r.IntN(3) > 0 {
				parents = []lineage.Parent{}
				seen := map[string]bool{}
				for _, id := range pick(4) {
					if !seen[id] {
						seen[id] = true
						parents = append(parents, lineage.Parent{ID: id, Weight: weights[r.IntN(len(weights))]})
					}
				}
			}
			n := w.Record(who[r.IntN(len(who))], session, fmt.Sprint(seed, i), parents)
			ids = append(ids, n.ID)
			for range 2 {
				c := pedigree.Call{Principal: "agent:planner", Session: fmt.Sprintf("s%d", r.IntN(2)), Tool: tools[r.IntN(len(tools))],
					Args: []byte(`{"to":"acct-1","memo":"m","amount":3}`)}
				if r.IntN(2) == 0 {
					c.Justification = pick(5)
				}
				for _, arg := range []string{"to", "memo"} {
					if r.IntN(3) == 0 {
						c.ArgSources = map[string][]string{}
						c.ArgSources[arg] = pick(3)
					}
				}
				a, ain, err := w.E.PreviewWith(t.Context(), lean, c)
				if err != nil {
					t.Fatal(err)
				}
				b, bin, err := w.E.PreviewWith(t.Context(), full, c)
				if err != nil {
					t.Fatal(err)
				}
				calls++
				switch {
				case len(ain) > len(bin):
					t.Fatalf("the lean input is longer than the whole one:\n%s\n%s", ain, bin)
				case len(ain) < len(bin):
					shorter++
				}
				if a.Decision != gate.Allow {
					differ[a.Decision]++
				}
				// (The two previews are two calls, a millisecond apart: their
				// IDs, the first step of every path, differ.)
				for _, u := range b.Untrusted {
					u.Path[0] = a.CallID
				}
				if a.Decision != b.Decision || !reflect.DeepEqual(a.Reasons, b.Reasons) || !reflect.DeepEqual(a.Untrusted, b.Untrusted) ||
					!reflect.DeepEqual(a.Warnings, b.Warnings) || a.Approval != b.Approval || !reflect.DeepEqual(a.Justification, b.Justification) {
					t.Fatalf("seed %d, call %+v:\nlean  %s %q %v\nwhole %s %q %v", seed, c, a.Decision, a.Reasons, a.Untrusted, b.Decision, b.Reasons, b.Untrusted)
				}
			}
		}
	}
	// The cases must exercise every outcome, or the comparison proves little.
	if differ[gate.Deny] < 20 || differ[gate.Ask] < 20 || shorter < calls/4 {
		t.Fatalf("%d calls, outcomes other than allow: %v, %d with a shorter lean input: the random worlds are too tame", calls, differ, shorter)
	}
	t.Logf("%d calls compared, outcomes other than allow: %v, %d with a shorter lean input", calls, differ, shorter)
}
