package trajectory

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func run(roles ...Role) *State {
	s := &State{}
	for _, r := range roles {
		s.Append(Call{Tool: string(r), Role: r})
	}
	return s
}

func TestFeatures(t *testing.T) {
	cases := []struct {
		name  string
		roles []Role
		want  map[string]float64
	}{
		{"empty", nil, map[string]float64{"length": 0, "recall_before_send": 0, "send_without_recall": 0, "recall_send_ratio": 0}},
		{"recall then send", []Role{Recall, Send}, map[string]float64{
			"n_recall": 1, "n_send": 1, "length": 2, "recall_before_send": 1, "send_without_recall": 0,
			"recall_send_ratio": 1, "longest_recall_run": 1, "first_recall": 1, "first_send": 0,
		}},
		{"send, recall, send", []Role{Send, Recall, Send}, map[string]float64{
			// any recall before any send: the second send counts, although
			// the first send came before the first recall.
			"recall_before_send": 1, "send_without_recall": 1, "n_send": 2, "recall_send_ratio": 0.5, "first_send": 1,
		}},
		{"send only", []Role{Send}, map[string]float64{"recall_before_send": 0, "send_without_recall": 1}},
		{"recall after the last send only", []Role{Send, Recall}, map[string]float64{"recall_before_send": 0, "send_without_recall": 1}},
		{"bigrams", []Role{List, Recall, Recall, Recall, Draft, Send, List, Draft}, map[string]float64{
			"bigram_list_recall": 1, "bigram_recall_recall": 2, "bigram_recall_draft": 1, "bigram_list_draft": 1, "bigram_draft_send": 1,
			"longest_recall_run": 3, "first_list": 1, "n_list": 2, "n_draft": 2, "length": 8,
		}},
		{"recall runs reset", []Role{Recall, Recall, Other, Recall}, map[string]float64{"longest_recall_run": 2, "n_recall": 3, "n_other": 1, "bigram_recall_recall": 1}},
		{"rag and save counted", []Role{RAG, Save, RAG}, map[string]float64{"n_rag": 2, "n_save": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := run(c.roles...).FeatureMap()
			if len(got) != len(FeatureNames) {
				t.Fatalf("%d features, want %d", len(got), len(FeatureNames))
			}
			for k, v := range c.want {
				if math.Abs(got[k]-v) > 1e-12 {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestFeaturesOfEveryPrefix(t *testing.T) {
	// Append is incremental: the state after each call equals a fresh run
	// over that prefix.
	roles := []Role{List, Recall, Send, Recall, Recall, Draft, Send}
	s := &State{}
	for i, r := range roles {
		s.Append(Call{Role: r})
		fresh := run(roles[:i+1]...)
		for j, v := range fresh.Features() {
			if s.Features()[j] != v {
				t.Fatalf("prefix %d: %s differs", i+1, FeatureNames[j])
			}
		}
	}
}

func TestRules(t *testing.T) {
	internal := Call{Tool: "email_send", Role: Send, RecipientKnown: true}
	external := Call{Tool: "email_send", Role: Send, RecipientKnown: true, RecipientExternal: true}
	unknown := Call{Tool: "email_send", Role: Send}
	untrusted := Call{Tool: "email_send", Role: Send, RecipientKnown: true, RecipientUntrusted: true}
	recall, other := Call{Role: Recall}, Call{Role: Other}
	cases := []struct {
		name   string
		before []Call
		call   Call
		want   []string
	}{
		{"internal send after recall", []Call{recall}, internal, nil},
		{"external send after recall", []Call{recall}, external, []string{RuleRecallThenExternalSend}},
		{"external send without recall", nil, external, nil},
		{"external send, recall only after it", []Call{external, recall}, internal, nil},
		{"any recall before any send", []Call{external, recall, other}, external, []string{RuleRecallThenExternalSend}},
		{"burst of recalls, then external send", []Call{recall, recall, recall}, external, []string{RuleRecallThenExternalSend, RuleRecallBurstSend}},
		{"untrusted recipient without recall", nil, untrusted, []string{RuleUntrustedRecipient}},
		// The structure-only fallback: recipients unknown.
		{"unknown recipient after recall", []Call{recall}, unknown, []string{RuleRecallThenSendUnknown}},
		{"unknown recipient after a burst", []Call{recall, recall, recall}, unknown, []string{RuleRecallThenSendUnknown}},
		{"unknown recipient without recall", []Call{other}, unknown, nil},
		{"unknown recipient, recall only after a send", []Call{unknown, recall}, other, nil},
		{"unknown recipient, recall before a later send", []Call{unknown, recall}, unknown, []string{RuleRecallThenSendUnknown}},
		{"external implies known", []Call{recall}, Call{Role: Send, RecipientExternal: true}, []string{RuleRecallThenExternalSend}},
		{"a recall raises nothing", []Call{recall, recall, recall}, recall, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &State{}
			for _, b := range c.before {
				s.Observe(b, nil)
			}
			n := len(s.Alerts)
			got := s.Observe(c.call, nil)
			var rules []string
			for _, a := range got {
				rules = append(rules, a.Rule)
				if a.At != len(c.before) {
					t.Errorf("alert at %d, want %d", a.At, len(c.before))
				}
			}
			if !slices.Equal(rules, c.want) {
				t.Fatalf("rules %v, want %v (%+v)", rules, c.want, got)
			}
			if len(s.Alerts)-n != len(got) {
				t.Fatalf("stored %d alerts, raised %d", len(s.Alerts)-n, len(got))
			}
			for _, a := range got {
				if a.Rule == RuleRecallThenSendUnknown && !strings.Contains(a.Message, "recipient was unknown") {
					t.Fatalf("the fallback must say the recipient was unknown: %q", a.Message)
				}
			}
		})
	}
}

func TestUnknownSendsCounted(t *testing.T) {
	s := &State{}
	for _, c := range []Call{{Role: Send}, {Role: Send, RecipientKnown: true}, {Role: Send, RecipientExternal: true}, {Role: Recall}} {
		s.Append(c)
	}
	if s.UnknownSends != 1 || s.ExternalSends != 1 {
		t.Fatalf("unknown %d external %d, want 1 and 1", s.UnknownSends, s.ExternalSends)
	}
}
