package pedigree

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
)

// Reevaluation is a logged decision evaluated again by this engine's gate,
// on the exact input the policy saw then and at the time it was made. With
// the same policy version the outcome must be the same: that is what makes
// the decision log auditable. With another version (other policies, another
// catalog) it says whether the new policy would have decided otherwise.
type Reevaluation struct {
	Version    int    `json:"version"`
	DecisionID string `json:"decision_id"`
	// Logged is the decision as made, with the policy version that made it.
	Logged              gate.Outcome `json:"logged"`
	LoggedReasons       []string     `json:"logged_reasons"`
	LoggedPolicyVersion string       `json:"logged_policy_version"`
	// Decision and Reasons are the outcome now, under PolicyVersion, the
	// version this engine's gate runs.
	Decision      gate.Outcome `json:"decision"`
	Reasons       []string     `json:"reasons"`
	PolicyVersion string       `json:"policy_version"`
	// Same: the policy version, the decision and its reasons are all
	// unchanged. Changes says what differs, one sentence each.
	Same    bool     `json:"same"`
	Changes []string `json:"changes"`
}

// Reevaluate evaluates a logged decision again (see Reevaluation). A
// decision that failed closed before the policy ran has no input and cannot
// be evaluated again: that is an error, not a difference.
func (e *Engine) Reevaluate(ctx context.Context, decisionID string) (*Reevaluation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := e.decisions.Record(decisionID)
	if err != nil {
		return nil, err
	}
	if r.Input == nil {
		return nil, fmt.Errorf("decision %s failed closed before the policy ran (%v); there is no input to evaluate", r.ID[:12], r.Reasons)
	}
	input := r.Input
	if !e.gate.Lean() {
		// The input the default policy logged lists only the untrusted
		// entries of the justification; this policy reads every entry.
		var nodes []*lineage.Node
		err := e.db.View(func(t *store.Txn) error {
			lt := t.In(store.Lineage)
			whole, err := e.wholeJustification(lt, &r.Decision)
			if err != nil {
				return err
			}
			nodes, err = e.graph.NodesIn(lt, whole)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("decision %s: its justification: %w", r.ID[:12], err)
		}
		if input, err = gate.WholeInput(input, nodes); err != nil {
			return nil, fmt.Errorf("decision %s: its logged input: %w", r.ID[:12], err)
		}
	}
	at, err := time.Parse(time.RFC3339Nano, r.Time)
	if err != nil {
		return nil, err
	}
	got, reasons, err := e.gate.Reevaluate(ctx, input, at)
	if err != nil {
		return nil, err
	}
	out := &Reevaluation{
		Version: 1, DecisionID: r.ID,
		Logged: r.Decision.Decision, LoggedReasons: nonNil(r.Reasons), LoggedPolicyVersion: r.PolicyVersion,
		Decision: got, Reasons: nonNil(reasons), PolicyVersion: e.gate.PolicyVersion(), Changes: []string{},
	}
	if out.LoggedPolicyVersion != out.PolicyVersion {
		out.Changes = append(out.Changes, fmt.Sprintf("policy version: logged %s, now %s", short(out.LoggedPolicyVersion), short(out.PolicyVersion)))
	}
	if out.Decision != out.Logged {
		out.Changes = append(out.Changes, fmt.Sprintf("decision: logged %s, now %s", out.Logged, out.Decision))
	}
	if !slices.Equal(out.Reasons, out.LoggedReasons) {
		out.Changes = append(out.Changes, "reasons differ")
	}
	out.Same = len(out.Changes) == 0
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
