package pedigree

import (
	"context"
	"fmt"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/kv"

	"github.com/pedigree-ai/pedigree/lineage"
)

// PlanReader is a Reader that can also read a stored plan. Both the engine
// and the server's client are; BuildCall needs one for a call that cites a
// plan.
type PlanReader interface {
	Reader
	// Plan is a stored plan entry's statement, by full ID.
	Plan(ctx context.Context, id string) (*lineage.Statement, error)
}

func (r engineReader) Plan(_ context.Context, id string) (*lineage.Statement, error) {
	env, _, err := r.e.graph.Envelope(id)
	if err != nil {
		return nil, err
	}
	st, _, _, err := lineage.Open(env)
	return st, err
}

// planJustification is the justification of a call that cites a plan step:
// the plan and the sources of its data arguments when the call matches the
// step (plus c.Justification when given), else the plan and the ordinary
// justification (c.Justification, or nil for the session's context). The
// gate decides again, on the stored plan; this only makes the call entry's
// parents say what it derives from.
func planJustification(ctx context.Context, r Reader, c Call, args []byte, srcs map[string][]string) (*lineage.PlanRef, []string, error) {
	pr, ok := r.(PlanReader)
	if !ok {
		return nil, nil, fmt.Errorf("%w: this reader cannot read plans", lineage.ErrPlan)
	}
	id, err := r.Resolve(ctx, c.Plan)
	if err != nil {
		return nil, nil, fmt.Errorf("plan %s: %w", c.Plan, err)
	}
	st, err := pr.Plan(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("plan %s: %w", c.Plan, err)
	}
	step, err := lineage.PlanStepOf(st, id, c.Session, c.PlanStep)
	if err != nil {
		return nil, nil, err
	}
	m, err := lineage.MatchStep(step, c.Tool, args)
	if err != nil {
		return nil, nil, err
	}
	ref := &lineage.PlanRef{ID: id, Step: c.PlanStep}
	just := []string{id}
	if !m.OK {
		if c.Justification == nil {
			ctxIDs, err := r.Context(ctx, c.Session)
			if err != nil {
				return nil, nil, err
			}
			return ref, append(just, ctxIDs...), nil
		}
		return ref, append(just, c.Justification...), nil
	}
	for _, name := range m.Data {
		just = append(just, srcs[name]...)
	}
	return ref, append(just, c.Justification...), nil
}

// planFact reads, inside t, the plan a call cites (nil when it cites none).
// The plan is one of the call's parents, so its node is among nodes.
func (e *Engine) planFact(t kv.Txn, st *lineage.Statement, nodes map[string]*lineage.Node) (*gate.PlanFact, error) {
	if st.Plan == nil {
		return nil, nil
	}
	pst, err := e.graph.StatementIn(t, st.Plan.ID)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", st.Plan.ID[:12], err)
	}
	n, ok := nodes[st.Plan.ID]
	if !ok {
		return nil, fmt.Errorf("%w: plan %s is not among the call's parents", lineage.ErrPlan, st.Plan.ID[:12])
	}
	return &gate.PlanFact{ID: st.Plan.ID, Statement: pst, Node: n}, nil
}
