package trajectory

import (
	"fmt"
	"slices"
)

// Role is what a tool does, as the tool catalog says.
type Role string

const (
	Recall Role = "recall"
	List   Role = "list"
	Save   Role = "save"
	Draft  Role = "draft"
	Send   Role = "send"
	RAG    Role = "rag"
	Other  Role = "other"
)

// Roles in feature order.
var Roles = []Role{Recall, List, Save, Draft, Send, RAG, Other}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	if slices.Contains(Roles, Role(s)) {
		return Role(s), nil
	}
	return "", fmt.Errorf("unknown role %q (recall, list, save, draft, send, rag, other)", s)
}

func roleIndex(r Role) int {
	if i := slices.Index(Roles, r); i >= 0 {
		return i
	}
	return len(Roles) - 1
}

// Call is one step of a session's trajectory: the tool, its role, and for a
// send what is known of its recipients.
type Call struct {
	Tool string `json:"tool"`
	Role Role   `json:"role"`
	// RecipientKnown: the send named its recipients. The zero value is
	// "unknown", so a send that says nothing of them gets the structural
	// rule rather than silence.
	RecipientKnown bool `json:"recipient_known,omitempty"`
	// RecipientExternal: a send to at least one recipient outside the
	// operator's domains, or to one that could not be parsed. It implies
	// that the recipients are known.
	RecipientExternal bool `json:"recipient_external,omitempty"`
	// RecipientUntrusted: the recipient argument descends from an untrusted
	// ancestor (from lineage).
	RecipientUntrusted bool `json:"recipient_untrusted,omitempty"`
}

// State is a session's trajectory summarised so far. Append updates it in
// O(1), so the features of every prefix are available as the session goes.
type State struct {
	Len             int    `json:"len"`
	Counts          [7]int `json:"counts"`
	First           Role   `json:"first,omitempty"`
	Last            Role   `json:"last,omitempty"`
	RecallRun       int    `json:"recall_run"`
	LongestRecall   int    `json:"longest_recall_run"`
	RecallBeforeSnd bool   `json:"recall_before_send"`
	SendNoRecall    bool   `json:"send_without_recall"`
	Bigrams         [5]int `json:"bigrams"`
	ExternalSends   int    `json:"external_sends"`
	UnknownSends    int    `json:"unknown_recipient_sends"`
	UntrustedSends  int    `json:"untrusted_recipient_sends"`
	// Calls and Alerts are what this value has seen; the gate stores them
	// apart from the features, so that a check reads only the features.
	Calls  []Call  `json:"-"`
	Alerts []Alert `json:"-"`
}

// The bigrams the detector counts, in feature order.
var bigrams = [5][2]Role{{List, Recall}, {Recall, Recall}, {Recall, Draft}, {List, Draft}, {Draft, Send}}

// MaxKeptCalls bounds the calls a state keeps for display; the features
// cover every call whatever this limit.
const MaxKeptCalls = 1000

// Append adds a call. Recall-before-send is "any recall before any send":
// a send followed by a recall and another send counts, which a
// first-recall-before-first-send test would miss.
func (s *State) Append(c Call) {
	r := c.Role
	if s.Len == 0 {
		s.First = r
	}
	if s.Len > 0 {
		for i, b := range bigrams {
			if s.Last == b[0] && r == b[1] {
				s.Bigrams[i]++
			}
		}
	}
	if r == Recall {
		s.RecallRun++
		s.LongestRecall = max(s.LongestRecall, s.RecallRun)
	} else {
		s.RecallRun = 0
	}
	if r == Send {
		if s.Counts[roleIndex(Recall)] > 0 {
			s.RecallBeforeSnd = true
		} else {
			s.SendNoRecall = true
		}
		if c.RecipientExternal {
			s.ExternalSends++
		} else if !c.RecipientKnown {
			s.UnknownSends++
		}
		if c.RecipientUntrusted {
			s.UntrustedSends++
		}
	}
	s.Counts[roleIndex(r)]++
	s.Len++
	s.Last = r
	if len(s.Calls) < MaxKeptCalls {
		s.Calls = append(s.Calls, c)
	}
}

// FeatureNames names the entries of Features, in order.
var FeatureNames = []string{
	"n_recall", "n_list", "n_save", "n_draft", "n_send", "n_rag", "n_other",
	"length", "send_without_recall", "recall_before_send", "recall_send_ratio", "longest_recall_run",
	"bigram_list_recall", "bigram_recall_recall", "bigram_recall_draft", "bigram_list_draft", "bigram_draft_send",
	"first_recall", "first_list", "first_send",
	"external_send", "untrusted_recipient_send",
}

// Features returns the structural features of the trajectory so far.
func (s *State) Features() []float64 {
	f := make([]float64, 0, len(FeatureNames))
	for _, c := range s.Counts {
		f = append(f, float64(c))
	}
	ratio := float64(s.Counts[roleIndex(Recall)]) / float64(max(1, s.Counts[roleIndex(Send)]))
	f = append(f, float64(s.Len), b2f(s.SendNoRecall), b2f(s.RecallBeforeSnd), ratio, float64(s.LongestRecall))
	for _, b := range s.Bigrams {
		f = append(f, float64(b))
	}
	f = append(f, b2f(s.First == Recall), b2f(s.First == List), b2f(s.First == Send))
	f = append(f, b2f(s.ExternalSends > 0), b2f(s.UntrustedSends > 0))
	return f
}

// FeatureMap is Features keyed by name, for the policy input and for people.
func (s *State) FeatureMap() map[string]float64 {
	m := make(map[string]float64, len(FeatureNames))
	for i, v := range s.Features() {
		m[FeatureNames[i]] = v
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// RecipientUnknown reports whether a send said nothing of its recipients.
func (c Call) RecipientUnknown() bool {
	return c.Role == Send && !c.RecipientKnown && !c.RecipientExternal
}
