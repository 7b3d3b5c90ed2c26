package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Reevaluation is a logged decision evaluated again by this gate, on the
// exact input the policy saw then and at the time it was made. With the same
// policy version the outcome must be the same: that is what makes the
// decision log auditable. With another version it says whether the new
// policy would have decided otherwise.
type Reevaluation struct {
	Version    int    `json:"version"`
	DecisionID string `json:"decision_id"`
	// Logged is the decision as made, with the policy version that made it.
	Logged              string   `json:"logged"`
	LoggedReasons       []string `json:"logged_reasons"`
	LoggedPolicyVersion string   `json:"logged_policy_version"`
	// Decision and Reasons are the outcome now, under PolicyVersion, the
	// version this gate runs.
	Decision      string   `json:"decision"`
	Reasons       []string `json:"reasons"`
	PolicyVersion string   `json:"policy_version"`
	// Same: the policy version, the decision, its reasons and the approval it
	// used are all unchanged. Changes says what differs, one sentence each.
	Same    bool     `json:"same"`
	Changes []string `json:"changes"`
}

// Reevaluation evaluates a logged decision again (see Reevaluation). A
// decision that failed closed before the policy ran has no input and
// cannot be evaluated again: that is an error, not a difference.
func (g *Gate) Reevaluation(ctx context.Context, decisionID string) (*Reevaluation, error) {
	r, err := g.record(decisionID)
	if err != nil {
		return nil, err
	}
	v, err := g.evalLogged(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &Reevaluation{
		Version: 1, DecisionID: r.ID,
		Logged: r.Decision.Decision, LoggedReasons: nonNilStrings(r.Reasons), LoggedPolicyVersion: r.PolicyVersion,
		Decision: v.Decision, Reasons: nonNilStrings(v.Reasons), PolicyVersion: g.version, Changes: []string{},
	}
	if r.PolicyVersion != g.version {
		out.Changes = append(out.Changes, fmt.Sprintf("policy version: logged %s, now %s", short(r.PolicyVersion), short(g.version)))
	}
	if v.Decision != r.Decision.Decision {
		out.Changes = append(out.Changes, fmt.Sprintf("decision: logged %s, now %s", r.Decision.Decision, v.Decision))
	}
	if !slices.Equal(out.Reasons, out.LoggedReasons) {
		out.Changes = append(out.Changes, "reasons differ")
	}
	if v.Approval != r.Approval {
		out.Changes = append(out.Changes, fmt.Sprintf("approval: logged %q, now %q", short(r.Approval), short(v.Approval)))
	}
	out.Same = len(out.Changes) == 0
	return out, nil
}

// evalLogged runs this gate's policy on a logged decision's input, at the
// logged time. An evaluation error is the fail-closed deny the gate would
// have logged.
func (g *Gate) evalLogged(ctx context.Context, r *record) (*verdict, error) {
	if r.Input == nil {
		return nil, fmt.Errorf("decision %s failed closed before the policy ran (%v); there is no input to evaluate", r.ID[:12], r.Reasons)
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(r.Input))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	in, err := ast.InterfaceToValue(raw)
	if err != nil {
		return nil, err
	}
	at, err := time.Parse(time.RFC3339Nano, r.Time)
	if err != nil {
		return nil, err
	}
	v, err := g.eval(ctx, in, at)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return &verdict{Decision: Deny, Reasons: []string{"fail closed: " + err.Error()}}, nil
	}
	return v, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
