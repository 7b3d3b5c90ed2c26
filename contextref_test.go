package pedigree_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/enginetest"
	"github.com/pedigree-ai/pedigree/lineage"
)

// TestContextRefDecidesAsListing is the engine's differential test of calls
// that name their context by reference: on random sessions (entries of
// every tier, strong and weak edges, recalls across two sessions
// interleaved), every call with the default justification is built both
// ways (by reference, as the engine builds it, and listing the context, as
// a sidecar client does), and gets the same decision, reasons, untrusted
// sources, warnings and justification; both are then checked and stored
// through CheckEnvelope, with the same decision and justification, and
// their traces reach the same ancestors and untrusted sources.
func TestContextRefDecidesAsListing(t *testing.T) {
	cat, err := gate.ParseCatalog([]byte(leanCatalog))
	if err != nil {
		t.Fatal(err)
	}
	// A gate whose policy has an extension reads every entry of the
	// justification, never the context's summary.
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
	tools := []string{"send", "send_asks", "send_steer_allow", "send_steer_deny", "email_send", "all_open", "lookup"}
	who := []string{"user:alice", "agent:planner", "tool:gmail_read", "tool:web_fetch", "tool:calculator", "user:mallory"}
	weights := []float64{1, 1, 0.1, 0.6}
	calls, refs, outcomes := 0, 0, map[gate.Outcome]int{}
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 47))
		w := enginetest.New(t, enginetest.Default, pedigree.WithCatalog(cat))
		var ids []string
		for i := range 40 {
			session := fmt.Sprintf("s%d", r.IntN(2))
			if len(ids) > 0 && r.IntN(5) == 0 {
				if err := w.E.Recall(t.Context(), session, []string{ids[r.IntN(len(ids))]}); err != nil {
					t.Fatal(err)
				}
			}
			var parents []lineage.Parent
			if len(ids) > 0 && r.IntN(3) == 0 {
				parents = []lineage.Parent{{ID: ids[r.IntN(len(ids))], Weight: weights[r.IntN(len(weights))]}}
			}
			ids = append(ids, w.Record(who[r.IntN(len(who))], session, fmt.Sprint(seed, i), parents).ID)
			c := pedigree.Call{Principal: "agent:planner", Session: fmt.Sprintf("s%d", r.IntN(2)), Tool: tools[r.IntN(len(tools))],
				Args: []byte(`{"to":"acct-1","memo":"m","amount":3}`)}
			if r.IntN(3) == 0 {
				c.ArgSources = map[string][]string{"memo": {ids[r.IntN(len(ids))]}}
			}
			ref, srcs, err := w.E.Envelopes().CallStatement(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			list, _, err := w.E.CallStatementListed(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if ref.Context != nil {
				refs++
				if ref.Version != 2 || len(ref.Parents) != 0 || ref.Context.N != len(list.Parents) {
					t.Fatalf("the engine's call statement: %+v, listed %d parents", ref, len(list.Parents))
				}
			} else if len(list.Parents) != 0 || ref.Version != 1 {
				t.Fatalf("a call in a non-empty context without a reference: %+v", ref)
			}
			same := func(a, b *gate.Decision) error {
				ua := slices.Clone(a.Untrusted)
				for i := range ua {
					ua[i].Path = append([]string{"call"}, ua[i].Path[1:]...)
				}
				ub := slices.Clone(b.Untrusted)
				for i := range ub {
					ub[i].Path = append([]string{"call"}, ub[i].Path[1:]...)
				}
				if a.Decision != b.Decision || !reflect.DeepEqual(a.Reasons, b.Reasons) || !reflect.DeepEqual(ua, ub) ||
					!reflect.DeepEqual(a.Warnings, b.Warnings) || !slices.Equal(a.Justification, b.Justification) {
					return fmt.Errorf("by reference %s %q %v %v\nlisted       %s %q %v %v", a.Decision, a.Reasons, ua, a.Justification, b.Decision, b.Reasons, ub, b.Justification)
				}
				return nil
			}
			var a *gate.Decision
			for _, g := range []*gate.Gate{nil, full} {
				var b *gate.Decision
				if a, err = w.E.PreviewStatement(t.Context(), g, ref, srcs); err != nil {
					t.Fatal(err)
				}
				if b, err = w.E.PreviewStatement(t.Context(), g, list, srcs); err != nil {
					t.Fatal(err)
				}
				if err := same(a, b); err != nil {
					t.Fatalf("seed %d call %d (%+v), lean gate %v: %v", seed, i, c, g == nil, err)
				}
			}
			outcomes[a.Decision]++
			calls++
			// Stored, each in a session of its own trajectory: the same
			// decision on the same context.
			var stored []*gate.Decision
			for _, st := range []*lineage.Statement{ref, list} {
				env, _, err := lineage.Sign(w.Keys["agent:planner"], st)
				if err != nil {
					t.Fatal(err)
				}
				d, err := w.E.Envelopes().Check(t.Context(), env, srcs)
				if err != nil {
					t.Fatal(err)
				}
				stored = append(stored, d)
			}
			if !slices.Equal(stored[0].Justification, stored[1].Justification) {
				t.Fatalf("seed %d call %d: stored justifications differ", seed, i)
			}
			tr, err := w.E.Trace(t.Context(), stored[0].CallID, lineage.TraceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tl, err := w.E.Trace(t.Context(), stored[1].CallID, lineage.TraceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if na, nl := ancestry(tr), ancestry(tl); na != nl || len(tr.Edges) != len(tl.Edges) {
				t.Fatalf("seed %d call %d: trace by reference %s (%d edges), listed %s (%d)", seed, i, na, len(tr.Edges), nl, len(tl.Edges))
			}
		}
	}
	if refs < 150 || len(outcomes) < 2 {
		t.Fatalf("only %d of %d calls named their context by reference; outcomes %v", refs, calls, outcomes)
	}
	t.Logf("%d calls, %d by reference, outcomes %v", calls, refs, outcomes)
}

// TestContextRefUnresolvedIsRefused: a version 2 call that cannot be
// resolved (its head is not the context's) is denied, fail closed, and
// not stored; one whose parents are read without the graph has none
// (lineage.ErrUnexpanded), never only its listed ones.
func TestContextRefUnresolvedIsRefused(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	a := w.Record("tool:web_fetch", "s", "a", nil)
	w.Record("agent:planner", "s", "b", nil)
	c := pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "send_money", Args: []byte(`{"to":"x"}`)}
	st, srcs, err := w.E.Envelopes().CallStatement(t.Context(), c)
	if err != nil || st.Context == nil || st.Context.N != 2 {
		t.Fatalf("%+v, %v", st, err)
	}
	if _, err := st.AllParents(); !errors.Is(err, lineage.ErrUnexpanded) {
		t.Fatalf("unresolved parents: %v", err)
	}
	st.Context.N = 1 // the head is the chain over two entries
	env, id, err := lineage.Sign(w.Keys["agent:planner"], st)
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.E.Envelopes().Check(t.Context(), env, srcs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != gate.Deny || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "fail closed: the call entry was refused") {
		t.Fatalf("an unresolvable reference: %s %q", d.Decision, d.Reasons)
	}
	if _, err := w.E.Trace(t.Context(), id, lineage.TraceOptions{}); !errors.Is(err, lineage.ErrUnknownEntry) {
		t.Fatalf("the refused call was stored: %v", err)
	}
	// The same call with the right reference is decided on the untrusted
	// entry it names.
	st.Context.N = 2
	env, _, err = lineage.Sign(w.Keys["agent:planner"], st)
	if err != nil {
		t.Fatal(err)
	}
	d, err = w.E.Envelopes().Check(t.Context(), env, srcs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision == gate.Allow || !slices.Contains(d.Justification, a.ID) || len(d.Untrusted) == 0 {
		t.Fatalf("a call resting on an untrusted entry by reference: %s %q %v", d.Decision, d.Reasons, d.Untrusted)
	}
}

// ancestry is a trace's ancestors and untrusted sources, the traced call
// set aside.
func ancestry(tr *lineage.Trace) string {
	var nodes, srcs []string
	for _, n := range tr.Nodes {
		if n.ID != tr.Root.ID {
			nodes = append(nodes, n.ID)
		}
	}
	for _, s := range tr.Untrusted {
		if s.ID != tr.Root.ID {
			srcs = append(srcs, fmt.Sprint(s.ID, s.Path[1:], s.Strong))
		}
	}
	slices.Sort(nodes)
	return fmt.Sprint(nodes, srcs)
}
