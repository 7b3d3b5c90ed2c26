package lineage_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/pedigree-ai/pedigree/lineage"
)

// TestSummaryLabelsAsTheWholeContext is the differential test of the
// context summary: on random DAGs (entries of every tier, strong and weak
// edges, three sessions, recalls across them), an entry whose parents are
// its session's context, or a prefix of it, gets from the summary exactly
// the node that folding its parents one by one gives (a fresh graph, with
// no summary and no cache, labels it so), and the summary's untrusted
// entries are exactly the prefix's entries with an untrusted label. On
// cleanup verify re-derives every stored label from the parents themselves.
func TestSummaryLabelsAsTheWholeContext(t *testing.T) {
	who := []string{"user:alice", "agent:planner", "tool:gmail_read", "tool:web_fetch", "tool:calculator", "user:mallory"}
	weights := []float64{1, 1, 0.1, 0.6}
	summarised := 0
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		w := newWorld(t)
		var ids []string
		for i := range 120 {
			session := fmt.Sprintf("s%d", r.IntN(3))
			var parents []lineage.Parent
			switch k := r.IntN(10); {
			case k < 3 && len(ids) > 0:
				parents = []lineage.Parent{}
				for range 1 + r.IntN(3) {
					id := ids[r.IntN(len(ids))]
					if !slices.ContainsFunc(parents, func(p lineage.Parent) bool { return p.ID == id }) {
						parents = append(parents, lineage.Parent{ID: id, Weight: weights[r.IntN(len(weights))]})
					}
				}
			case k == 3 && len(ids) > 0:
				if err := w.recall(session, ids[r.IntN(len(ids))]); err != nil {
					t.Fatal(err)
				}
				continue
			default:
				parents = w.context(session)
				if len(parents) > 1 && k == 4 {
					parents = parents[:1+r.IntN(len(parents)-1)]
				}
				if len(parents) > 1 && k == 5 {
					parents[r.IntN(len(parents))].Weight = 0.6
				}
			}
			if len(parents) > lineage.MaxParents {
				parents = parents[:lineage.MaxParents]
			}
			st := w.statement(who[r.IntN(len(who))], session, fmt.Sprint(seed, i), parents)
			if r.IntN(4) == 0 {
				st.Kind, st.Tool, st.Args = lineage.KindCall, "send", []byte(`{"to":"x"}`)
			}
			env, _, err := lineage.Sign(w.keys[st.Principal], st)
			if err != nil {
				t.Fatal(err)
			}
			content := []byte(fmt.Sprint(seed, i))
			if st.Kind == lineage.KindCall {
				content = nil
			}
			if s := w.g.Summary(st); s != nil {
				summarised++
				nodes, err := w.fresh().Nodes(ids4(parents))
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, n := range nodes {
					if !n.Reach.Trusted() {
						want = append(want, n.ID)
					}
				}
				if s.N != len(parents) || !slices.Equal(s.Untrusted, want) {
					t.Fatalf("seed %d entry %d: summary of %d parents lists %v untrusted, want %v", seed, i, s.N, s.Untrusted, want)
				}
			}
			got, err := w.g.Prepare(t.Context(), env, content)
			if err != nil {
				t.Fatal(err)
			}
			want, err := w.fresh().Prepare(t.Context(), env, content)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Node, want.Node) {
				t.Fatalf("seed %d entry %d: summarised %+v\nfolded %+v", seed, i, got.Node, want.Node)
			}
			n, err := w.write(got)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, n.ID)
		}
	}
	if summarised < 300 {
		t.Fatalf("only %d entries were labelled from a summary", summarised)
	}
	t.Logf("%d entries labelled from a summary", summarised)
}

func ids4(ps []lineage.Parent) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}
