package gate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/lineage"
)

// A person in the loop closes a deny or an ask with a signed approval
// (approval.go) or a signed rejection. Either is a review of the decision;
// a decision has at most one rejection, and a rejected decision can no
// longer be approved.

var (
	// ErrRejected: the decision was rejected, so it cannot be approved.
	ErrRejected = errors.New("decision rejected")
	// ErrReviewTampered: a review row does not match the signed entry it
	// names.
	ErrReviewTampered = errors.New("review row rewritten")
)

// Review outcomes.
const (
	Approved = "approved"
	Rejected = "rejected"
)

// Review is a person's answer to a logged decision.
type Review struct {
	DecisionID string `json:"decision_id"`
	Outcome    string `json:"outcome"`
	Entry      string `json:"entry"`
	By         string `json:"by"`
	Time       string `json:"time"`
}

// Pending is a deny or an ask a person can still approve or reject, with
// the evidence they decide on.
type Pending struct {
	DecisionID string           `json:"decision_id"`
	Decision   Outcome          `json:"decision"`
	Tool       string           `json:"tool"`
	Args       json.RawMessage  `json:"args"`
	Session    string           `json:"session"`
	Principal  string           `json:"principal"`
	Time       string           `json:"time"`
	CallID     string           `json:"call_id"`
	Reasons    []string         `json:"reasons"`
	Untrusted  []lineage.Source `json:"untrusted"`
	// Arguments says where each argument came from, as the policy saw it.
	Arguments map[string]ArgProvenance `json:"arguments"`
	// Plan is the plan step the call cited, if any.
	Plan *lineage.PlanRef `json:"plan,omitempty"`
}

// ArgProvenance is one argument's sources: explicit when the agent said
// where the value came from, else the whole justification. Protected is
// the catalog's rule as the policy saw it: the argument must come from
// trusted entries (every argument the catalog does not call data).
type ArgProvenance struct {
	Explicit  bool        `json:"explicit"`
	Sources   []SourceRef `json:"sources"`
	Protected bool        `json:"protected"`
}

// SourceRef is one entry an argument came from.
type SourceRef struct {
	ID            string `json:"id"`
	Principal     string `json:"principal"`
	EffectiveTier string `json:"effective_tier"`
}

// ReviewConflict is the error for a review that an earlier one forbids: a
// rejected decision cannot be approved or rejected again, an approved one
// cannot be rejected.
func ReviewConflict(prev *Review) error {
	if prev.Outcome == Rejected {
		return fmt.Errorf("%w: %s rejected decision %s (rejection %s)", ErrRejected, prev.By, short(prev.DecisionID), short(prev.Entry))
	}
	return fmt.Errorf("%w: %s already approved decision %s (approval %s)", ErrApproval, prev.By, short(prev.DecisionID), short(prev.Entry))
}

// short is an ID's first 12 characters, as reasons and messages print it
// (12 code points, as Rego's substring counts them).
func short(id string) string {
	n := 0
	for i := range id {
		if n == 12 {
			return id[:i]
		}
		n++
	}
	return id
}

// ArgumentsOf reads the per-argument provenance out of a logged policy
// input.
func ArgumentsOf(input []byte) (map[string]ArgProvenance, error) {
	out := map[string]ArgProvenance{}
	if input == nil {
		return out, nil
	}
	var in struct {
		Arguments map[string]struct {
			Explicit bool `json:"explicit"`
			Sources  []struct {
				ID            string `json:"id"`
				Principal     string `json:"principal"`
				EffectiveTier string `json:"effective_tier"`
			} `json:"sources"`
		} `json:"arguments"`
		Tool struct {
			Args map[string]struct {
				Trusted bool `json:"trusted"`
			} `json:"args"`
		} `json:"tool"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	for name, a := range in.Arguments {
		srcs := make([]SourceRef, len(a.Sources))
		for i, s := range a.Sources {
			srcs[i] = SourceRef{ID: s.ID, Principal: s.Principal, EffectiveTier: s.EffectiveTier}
		}
		// As the policy's protected(name): no rule, or a rule that wants
		// trusted sources.
		rule, ruled := in.Tool.Args[name]
		out[name] = ArgProvenance{Explicit: a.Explicit, Sources: srcs, Protected: !ruled || rule.Trusted}
	}
	return out, nil
}
