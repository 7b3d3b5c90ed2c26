package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
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

// pReview: gr/<decision id> -> Review JSON, written beside the signed entry
// it names (an approval or a rejection of that decision); the entry is what
// authenticates it, and Reviews checks that it says so.
const pReview = "gr/"

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
	Decision   string           `json:"decision"`
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
// where the value came from, else the whole justification.
type ArgProvenance struct {
	Explicit bool        `json:"explicit"`
	Sources  []SourceRef `json:"sources"`
}

// SourceRef is one entry an argument came from.
type SourceRef struct {
	ID            string `json:"id"`
	Principal     string `json:"principal"`
	EffectiveTier string `json:"effective_tier"`
}

func reviewKey(decisionID string) []byte { return []byte(pReview + decisionID) }

// reviewOf reads a decision's review inside t (nil when none).
func reviewOf(t *store.Txn, decisionID string) (*Review, error) {
	b, err := t.Get(reviewKey(decisionID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Review
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("review of decision %s: %w", decisionID[:12], err)
	}
	return &r, nil
}

// recordReview writes a decision's review inside t, once: an approval
// after a rejection, or a second rejection, is refused.
func recordReview(t *store.Txn, r Review) error {
	prev, err := reviewOf(t, r.DecisionID)
	if err != nil {
		return err
	}
	if prev != nil && (prev.Outcome == Rejected || r.Outcome == Rejected) {
		return reviewConflict(prev)
	}
	if prev != nil {
		return nil // a later approval of an approved decision: the first stays the review
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.Set(reviewKey(r.DecisionID), b)
}

func reviewConflict(prev *Review) error {
	if prev.Outcome == Rejected {
		return fmt.Errorf("%w: %s rejected decision %s (rejection %s)", ErrRejected, prev.By, prev.DecisionID[:12], prev.Entry[:12])
	}
	return fmt.Errorf("%w: %s already approved decision %s (approval %s)", ErrApproval, prev.By, prev.DecisionID[:12], prev.Entry[:12])
}

// checkNotRejected refuses to approve a rejected decision.
func (g *Gate) checkNotRejected(decisionID string) error {
	return g.db.View(func(t *store.Txn) error {
		r, err := reviewOf(t, decisionID)
		if err != nil || r == nil || r.Outcome != Rejected {
			return err
		}
		return reviewConflict(r)
	})
}

// Reject records a signed rejection of a logged deny or ask. The rejecter
// must be a user-tier principal, the rejection must bind the decision's
// session and action, and the decision must not have been reviewed.
func (g *Gate) Reject(ctx context.Context, env []byte) (*lineage.Node, error) {
	st, _, _, err := lineage.Open(env)
	if err != nil {
		return nil, err
	}
	if st.Kind != lineage.KindRejection {
		return nil, fmt.Errorf("%w: a rejection entry is needed, not %s", ErrApproval, st.Kind)
	}
	p, ok := g.graph.Registry().Lookup(st.Principal)
	if !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, st.Principal)
	}
	if p.Tier != registry.User {
		return nil, fmt.Errorf("%w: %s is %s tier; only a user-tier principal rejects", ErrApproval, p.ID, p.Tier)
	}
	d, err := g.Decision(st.Rejection.Decision)
	if err != nil {
		return nil, err
	}
	switch {
	case d.Decision == Allow:
		return nil, fmt.Errorf("%w: decision %s allowed the call; there is nothing to reject", ErrApproval, d.ID[:12])
	case d.Session != st.Session || d.ArgsDigest != st.Rejection.Action:
		return nil, fmt.Errorf("%w: the rejection does not bind the decision's session and action", ErrApproval)
	}
	err = g.db.View(func(t *store.Txn) error {
		r, err := reviewOf(t, d.ID)
		if err != nil || r == nil {
			return err
		}
		return reviewConflict(r)
	})
	if err != nil {
		return nil, err
	}
	n, err := g.graph.Insert(ctx, env, nil)
	if err != nil {
		return nil, err
	}
	err = g.db.Update(func(t *store.Txn) error {
		return recordReview(t, Review{DecisionID: d.ID, Outcome: Rejected, Entry: n.ID, By: p.ID, Time: st.Time})
	})
	return n, err
}

// Reviews lists every review, oldest first. A review row whose entry is not
// an approval or rejection of its decision by its reviewer is an error: the
// row was rewritten.
func (g *Gate) Reviews(ctx context.Context) ([]Review, error) {
	var out []Review
	err := g.db.View(func(t *store.Txn) error {
		return t.Iterate([]byte(pReview), true, func(k, v []byte) error {
			var r Review
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("review row %s: %w", k, err)
			}
			if err := checkReview(t, r); err != nil {
				return err
			}
			out = append(out, r)
			return ctx.Err()
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Review) int { return cmpTime(a.Time, b.Time) })
	return out, nil
}

func checkReview(t *store.Txn, r Review) error {
	env, err := t.Get([]byte("e/" + r.Entry))
	if err != nil {
		return fmt.Errorf("%w: the review of decision %s names entry %s, which is not stored", ErrReviewTampered, r.DecisionID, r.Entry)
	}
	st, _, _, err := lineage.Open(env)
	if err != nil {
		return err
	}
	ok := st.Principal == r.By && st.Time == r.Time
	switch r.Outcome {
	case Approved:
		ok = ok && st.Approval != nil && st.Approval.Decision == r.DecisionID
	case Rejected:
		ok = ok && st.Rejection != nil && st.Rejection.Decision == r.DecisionID
	default:
		ok = false
	}
	if !ok {
		return fmt.Errorf("%w: the review row of decision %s does not match the entry it names", ErrReviewTampered, r.DecisionID)
	}
	return nil
}

func cmpTime(a, b string) int {
	// The nano layout drops trailing zeros, so the strings do not sort as
	// times: parse them.
	ta, ea := time.Parse(time.RFC3339Nano, a)
	tb, eb := time.Parse(time.RFC3339Nano, b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	return ta.Compare(tb)
}

// PendingDecisions lists the denies and asks nobody has approved or
// rejected yet, newest first, with where each argument came from. A
// decision whose call entry was refused (a fail-closed deny before the
// policy ran) is left out: there is no stored call to approve.
func (g *Gate) PendingDecisions(ctx context.Context) ([]Pending, error) {
	ds, err := g.Decisions(ctx, 0)
	if err != nil {
		return nil, err
	}
	out := []Pending{}
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.Decision == Allow {
			continue
		}
		p, err := g.pending(d)
		if err != nil {
			return nil, err
		}
		if p != nil {
			out = append(out, *p)
		}
	}
	return out, nil
}

func (g *Gate) pending(d Decision) (*Pending, error) {
	var p *Pending
	err := g.db.View(func(t *store.Txn) error {
		if r, err := reviewOf(t, d.ID); err != nil || r != nil {
			return err
		}
		env, err := t.Get([]byte("e/" + d.CallID))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		st, _, _, err := lineage.Open(env)
		if err != nil {
			return err
		}
		in, err := t.Get([]byte(pInput + d.ID))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		args, err := argumentsOf(in)
		if err != nil {
			return fmt.Errorf("decision %s: its logged input: %w", d.ID[:12], err)
		}
		p = &Pending{DecisionID: d.ID, Decision: d.Decision, Tool: d.Tool, Args: st.Args, Session: d.Session,
			Principal: d.Principal, Time: d.Time, CallID: d.CallID, Reasons: d.Reasons, Untrusted: d.Untrusted,
			Arguments: args, Plan: st.Plan}
		return nil
	})
	return p, err
}

// argumentsOf reads the per-argument provenance out of a logged policy
// input.
func argumentsOf(input []byte) (map[string]ArgProvenance, error) {
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
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	for name, a := range in.Arguments {
		srcs := make([]SourceRef, len(a.Sources))
		for i, s := range a.Sources {
			srcs[i] = SourceRef{ID: s.ID, Principal: s.Principal, EffectiveTier: s.EffectiveTier}
		}
		out[name] = ArgProvenance{Explicit: a.Explicit, Sources: srcs}
	}
	return out, nil
}
