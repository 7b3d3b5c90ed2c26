package pedigree

import (
	"fmt"
	"slices"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/kv"

	"github.com/pedigree-ai/pedigree/lineage"
)

// planFact reads, inside t, the plan a call cites (nil when it cites none).
// The plan is one of the call's parents, so its node is among nodes. For
// each source of the call's arguments that has one parent, a call citing
// the same plan, it reads that call too: the gate tells from it whether the
// source is the output of the step a delegated slot names. And it reads the
// other calls that cite the same step (earlierCalls).
func (e *Engine) planFact(t kv.Txn, st *lineage.Statement, callID string, nodes map[string]*lineage.Node, argSources map[string][]string) (*gate.PlanFact, error) {
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
	f := &gate.PlanFact{ID: st.Plan.ID, Statement: pst, Node: n}
	for _, ids := range argSources {
		for _, id := range ids {
			src, ok := nodes[id]
			if _, seen := f.Outputs[id]; !ok || seen || len(src.Parents) != 1 {
				continue
			}
			call, err := e.graph.StatementIn(t, src.Parents[0].ID)
			if err != nil {
				return nil, fmt.Errorf("the parent of argument source %s: %w", id[:12], err)
			}
			if call.Kind != lineage.KindCall || call.Plan == nil || call.Plan.ID != f.ID {
				continue
			}
			if f.Outputs == nil {
				f.Outputs = map[string]lineage.StepCall{}
			}
			f.Outputs[id] = lineage.StepCall{ID: src.Parents[0].ID, Statement: call}
		}
	}
	if err := e.earlierCalls(t, st, callID, f); err != nil {
		return nil, err
	}
	return f, nil
}

// earlierCalls reads, inside t, the stored calls other than st's own that
// cite st's plan step, when that step has a delegated slot: the gate counts
// those that carried the step out.
func (e *Engine) earlierCalls(t kv.Txn, st *lineage.Statement, callID string, f *gate.PlanFact) error {
	ref := st.Plan
	if f.Statement.Kind != lineage.KindPlan || ref.Step < 0 || ref.Step >= len(f.Statement.Steps) {
		return nil // the gate fails closed on the citation
	}
	ds, err := f.Statement.Steps[ref.Step].Delegations()
	if err != nil || len(ds) == 0 {
		return err
	}
	calls, err := e.graph.PlanCallsIn(t, ref.ID, ref.Step)
	if err != nil {
		return err
	}
	for _, c := range calls {
		if c.ID != callID {
			f.Earlier = append(f.Earlier, c)
		}
	}
	return nil
}

// sameJustification reports whether call relies on what the call of
// decision d relied on, for an approval of d to allow it. Without a plan,
// or under a plan that gave no authority, d's justification is its call's
// parents, and call's must hold them all (it may hold more: see grant.go).
// Under a plan with authority, d's justification is the control
// part alone (the plan), so the parents of the call d decided on are read
// (inside t, verified) and must be call's, with the same plan step: the
// sources of its data arguments, a delegated value's included, are bound
// too.
func (e *Engine) sameJustification(t kv.Txn, d *gate.Decision, call *lineage.Statement) (bool, error) {
	if d.Plan == nil || !d.Plan.Authority {
		// The context may have grown since the ask ("I approved it,
		// retry"): it must still hold every source the person was shown.
		ids, err := parentIDs(call)
		if err != nil {
			return false, err
		}
		was, err := e.wholeJustification(t, d)
		if err != nil {
			return false, err
		}
		return within(was, ids), nil
	}
	st, err := e.graph.StatementIn(t, d.CallID)
	if err != nil {
		return false, err
	}
	if st.Plan == nil || call.Plan == nil || *st.Plan != *call.Plan {
		return false, nil
	}
	was, err := parentIDs(st)
	if err != nil {
		return false, err
	}
	now, err := parentIDs(call)
	if err != nil {
		return false, err
	}
	return sameSet(was, now), nil
}

// sameSet reports whether a and b hold the same IDs.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}
