package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/open-policy-agent/opa/v1/ast"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

func approvalPrefix(session, action string) []byte {
	b := append([]byte(pApproval), session...)
	b = append(b, 0)
	b = append(b, action...)
	return append(b, 0)
}

// Approve records a signed approval entry for a logged decision. The
// approval binds the decision's session and the digest of its exact tool and
// canonical arguments; the next identical check in that session is allowed
// once and consumes it. The approver must be a user-tier principal.
func (g *Gate) Approve(ctx context.Context, env []byte) (*lineage.Node, error) {
	st, _, _, err := lineage.Open(env)
	if err != nil {
		return nil, err
	}
	if st.Kind != lineage.KindApproval {
		return nil, fmt.Errorf("%w: an approval entry is needed, not %s", ErrApproval, st.Kind)
	}
	p, ok := g.graph.Registry().Lookup(st.Principal)
	if !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, st.Principal)
	}
	if p.Tier != registry.User {
		return nil, fmt.Errorf("%w: %s is %s tier; only a user-tier principal approves", ErrApproval, p.ID, p.Tier)
	}
	d, err := g.Decision(st.Approval.Decision)
	if err != nil {
		return nil, err
	}
	switch {
	case d.Decision == Allow:
		return nil, fmt.Errorf("%w: decision %s already allowed the call", ErrApproval, d.ID[:12])
	case d.Session != st.Session || d.ArgsDigest != st.Approval.Action:
		return nil, fmt.Errorf("%w: the approval does not bind the decision's session and action", ErrApproval)
	}
	exp, _ := time.Parse(time.RFC3339Nano, st.Approval.Expires)
	if !exp.After(g.clock()) {
		return nil, fmt.Errorf("%w: the approval has already expired", ErrApproval)
	}
	n, err := g.graph.Insert(ctx, env, nil)
	if err != nil {
		return nil, err
	}
	k := append(approvalPrefix(st.Session, st.Approval.Action), n.ID...)
	err = g.db.Update(func(t *store.Txn) error { return t.Set(k, []byte(st.Approval.Expires)) })
	return n, err
}

// approvals lists the approvals that can still allow this exact action in
// this session: unused, unexpired, by a user-tier principal.
func (g *Gate) approvals(session, action string, now time.Time) (*ast.Term, error) {
	var out []*ast.Term
	prefix := approvalPrefix(session, action)
	err := g.db.View(func(t *store.Txn) error {
		return t.Iterate(prefix, true, func(k, v []byte) error {
			id := string(k[len(prefix):])
			exp, err := time.Parse(time.RFC3339Nano, string(v))
			if err != nil || !exp.After(now) {
				return nil
			}
			if used, err := t.Has([]byte(pUsed + id)); err != nil || used {
				return err
			}
			env, err := t.Get([]byte("e/" + id))
			if err != nil {
				return nil
			}
			st, _, _, err := lineage.Open(env)
			if err != nil {
				return nil
			}
			p, ok := g.graph.Registry().Lookup(st.Principal)
			if !ok || p.Tier != registry.User {
				return nil
			}
			out = append(out, obj("id", str(id), "approver", str(p.ID), "approver_tier", str(p.Tier.String()), "expires", str(string(v))))
			return nil
		})
	})
	return ast.ArrayTerm(out...), err
}

// Decision returns a logged decision by ID or unique prefix.
func (g *Gate) Decision(idOrPrefix string) (*Decision, error) {
	r, err := g.record(idOrPrefix)
	if err != nil {
		return nil, err
	}
	return &r.Decision, nil
}

func (g *Gate) record(idOrPrefix string) (*record, error) {
	if len(idOrPrefix) < lineage.MinPrefix {
		return nil, fmt.Errorf("%w: %q is too short an ID", ErrUnknownDecision, idOrPrefix)
	}
	var found []string
	var body, input []byte
	err := g.db.View(func(t *store.Txn) error {
		err := t.Iterate([]byte(pDecision+idOrPrefix), true, func(k, v []byte) error {
			found = append(found, string(k[len(pDecision):]))
			body = bytes.Clone(v)
			if len(found) > 1 {
				return store.ErrStop
			}
			return nil
		})
		if err != nil || len(found) != 1 {
			return err
		}
		input, err = t.Get([]byte(pInput + found[0]))
		if errors.Is(err, store.ErrNotFound) {
			input, err = nil, nil
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, fmt.Errorf("%w %s", ErrUnknownDecision, idOrPrefix)
	case len(found) > 1:
		return nil, fmt.Errorf("%w: %s is an ambiguous prefix", ErrUnknownDecision, idOrPrefix)
	}
	r := &record{Input: input}
	if err := json.Unmarshal(body, &r.Decision); err != nil {
		return nil, fmt.Errorf("decision %s: %w", idOrPrefix, err)
	}
	r.ID = found[0]
	return r, nil
}

// Decisions lists logged decisions in order, newest last; limit 0 lists all,
// otherwise the last limit.
func (g *Gate) Decisions(ctx context.Context, limit int) ([]Decision, error) {
	var ids [][]byte
	err := g.db.View(func(t *store.Txn) error {
		return t.Iterate([]byte(pDecisionSeq), true, func(_, v []byte) error {
			ids = append(ids, v)
			return ctx.Err()
		})
	})
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(ids) > limit {
		ids = ids[len(ids)-limit:]
	}
	out := make([]Decision, 0, len(ids))
	for _, id := range ids {
		d, err := g.Decision(string(id))
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, nil
}

// Reevaluate runs the policy again on a logged decision's input, at the
// logged time, and refuses a decision made by another policy version. With
// the same policy version the outcome is the same: that is what makes the
// decision log auditable. Reevaluation also says what changed.
func (g *Gate) Reevaluate(ctx context.Context, decisionID string) (string, []string, error) {
	r, err := g.record(decisionID)
	if err != nil {
		return "", nil, err
	}
	if r.PolicyVersion != g.version {
		return "", nil, fmt.Errorf("decision %s was made by policy version %s, this gate runs %s", r.ID[:12], r.PolicyVersion, g.version)
	}
	v, err := g.evalLogged(ctx, r)
	if err != nil {
		return "", nil, err
	}
	return v.Decision, v.Reasons, nil
}

// Trajectory keys: the features of a session (small, read on every check),
// and its calls and alerts in order (read only to show them).
const (
	pTrajCall  = "tc/" // tc/<session>\x00<seq> -> trajectory.Call
	pTrajAlert = "ta/" // ta/<session>\x00<seq> -> trajectory.Alert
)

func trajKey(prefix, session string, seq uint64) []byte {
	b := append([]byte(prefix), session...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

// Trajectory returns a session's trajectory features, without its calls and
// alerts (see TrajectoryLog).
func (g *Gate) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	s := &trajectory.State{}
	err := g.db.View(func(t *store.Txn) error {
		b, err := t.Get([]byte(pTrajectory + session))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(b, s)
	})
	return s, err
}

// TrajectoryLog returns a session's trajectory with its calls and alerts.
func (g *Gate) TrajectoryLog(ctx context.Context, session string) (*trajectory.State, error) {
	s, err := g.Trajectory(ctx, session)
	if err != nil {
		return nil, err
	}
	err = g.db.View(func(t *store.Txn) error {
		prefix := append([]byte(pTrajCall+session), 0)
		if err := t.Iterate(prefix, true, func(_, v []byte) error {
			var c trajectory.Call
			s.Calls = append(s.Calls, c)
			return json.Unmarshal(v, &s.Calls[len(s.Calls)-1])
		}); err != nil {
			return err
		}
		prefix = append([]byte(pTrajAlert+session), 0)
		return t.Iterate(prefix, true, func(_, v []byte) error {
			var a trajectory.Alert
			s.Alerts = append(s.Alerts, a)
			return json.Unmarshal(v, &s.Alerts[len(s.Alerts)-1])
		})
	})
	return s, err
}

// Observe appends a call that did not go through a check (a memory recall)
// to its session's trajectory.
func (g *Gate) Observe(ctx context.Context, session string, c trajectory.Call) ([]trajectory.Alert, error) {
	var alerts []trajectory.Alert
	err := g.db.Update(func(t *store.Txn) error {
		var err error
		alerts, err = g.appendTrajectory(t, session, c)
		return err
	})
	return alerts, err
}

func (g *Gate) appendTrajectory(t *store.Txn, session string, c trajectory.Call) ([]trajectory.Alert, error) {
	k := []byte(pTrajectory + session)
	s := &trajectory.State{}
	b, err := t.Get(k)
	if err == nil {
		if err := json.Unmarshal(b, s); err != nil {
			return nil, fmt.Errorf("trajectory of %s: %w", session, err)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	at := uint64(s.Len)
	alerts := s.Observe(c, g.model)
	if b, err = json.Marshal(s); err != nil {
		return nil, err
	}
	if err := t.Set(k, b); err != nil {
		return nil, err
	}
	if at < trajectory.MaxKeptCalls {
		cb, _ := json.Marshal(c)
		if err := t.Set(trajKey(pTrajCall, session, at), cb); err != nil {
			return nil, err
		}
	}
	for i, a := range alerts {
		ab, _ := json.Marshal(a)
		if err := t.Set(trajKey(pTrajAlert, session, at<<8|uint64(i)), ab); err != nil {
			return nil, err
		}
	}
	return alerts, nil
}

// VerifyDecision checks inside t that a logged decision is stored and that
// its record hashes to its ID (which covers the digest of its input).
func (g *Gate) VerifyDecision(t *store.Txn, id string) error {
	b, err := t.Get([]byte(pDecision + id))
	if errors.Is(err, store.ErrNotFound) {
		return errors.New("the logged decision is missing")
	}
	if err != nil {
		return err
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != id {
		return errors.New("the decision record was rewritten: it does not hash to its ID")
	}
	var d Decision
	if err := json.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("the decision record does not decode: %v", err)
	}
	in, err := t.Get([]byte(pInput + id))
	switch {
	case errors.Is(err, store.ErrNotFound):
		if d.InputDigest != "" {
			return errors.New("the decision's logged input was deleted")
		}
	case err != nil:
		return err
	default:
		if s := sha256.Sum256(in); hex.EncodeToString(s[:]) != d.InputDigest {
			return errors.New("the decision's logged input was rewritten")
		}
	}
	return nil
}

// DecisionIDs lists every stored decision inside t.
func (g *Gate) DecisionIDs(t *store.Txn) ([]string, error) {
	var ids []string
	err := t.Iterate([]byte(pDecisionSeq), true, func(_, v []byte) error {
		ids = append(ids, string(v))
		return nil
	})
	return ids, err
}
