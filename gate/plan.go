package gate

import (
	"fmt"
	"slices"

	"github.com/pedigree-ai/pedigree/lineage"
)

// PlanUse is how a decision used the plan step its call cites.
//
// The plan stands as the call's control justification (Authority) when the
// call matches its step (lineage.MatchStep) and the plan's effective tier
// is trusted. Then the step's literals come from the plan, each data slot
// is judged by its own sources under the catalog's argument rules, and the
// control justification is the plan and whatever else the call names that
// is not a data argument's source. Otherwise the call is judged by the
// ordinary rules on all its parents, and Why says why the plan gave no
// authority.
type PlanUse struct {
	ID        string `json:"id"`
	Step      int    `json:"step"`
	Authority bool   `json:"authority"`
	Why       string `json:"why,omitempty"`

	control []string
	literal []string
	data    []string
	// delegated are the data slots that name their source (see
	// lineage.Delegation), by argument.
	delegated map[string]*delegatedArg
	// earlier counts the other calls of the session that carried out the
	// step (cited it and matched it) drawing on the source this call's
	// delegated arguments come from (one of its parents is among their
	// From), when it has delegated slots: a delegation holds once per
	// step and source.
	earlier int
}

// delegatedArg is a delegated slot a call fills: the source the plan names
// for it, and which of the argument's sources are that source's output.
type delegatedArg struct {
	lineage.Delegation
	// From are the argument's sources that are the named source: the entry
	// itself, or an output whose one parent is a call that cites the named
	// step of this plan and matches it.
	From []string
	// Step is the named step (tool and arguments), for the reason.
	Step *lineage.PlanStep
}

// planUse judges a call's plan citation against the stored plan the engine
// read. A citation that names no stored plan of the call's session, or a
// step the plan does not have, is an error: the check fails closed.
func (g *Gate) planUse(f *Facts) (*PlanUse, error) {
	st := f.Statement
	ref := st.Plan
	if ref == nil {
		return nil, nil
	}
	if f.Plan == nil || f.Plan.ID != ref.ID || f.Plan.Statement == nil || f.Plan.Node == nil {
		return nil, fmt.Errorf("%w: plan %s was not read", lineage.ErrPlan, ref.ID[:12])
	}
	step, err := lineage.PlanStepOf(f.Plan.Statement, ref.ID, st.Session, ref.Step)
	if err != nil {
		return nil, err
	}
	u := &PlanUse{ID: ref.ID, Step: ref.Step}
	m, err := lineage.MatchStep(step, st.Tool, st.Args)
	if err != nil {
		return nil, err
	}
	if !m.OK {
		u.Why = m.Why
		return u, nil
	}
	if n := f.Plan.Node; !n.Effective.Trusted() {
		u.Why = fmt.Sprintf("the plan's effective tier is %s: it was made from untrusted content", n.Effective)
		return u, nil
	}
	u.Authority, u.literal, u.data = true, m.Literal, m.Data
	if u.delegated, err = delegatedArgs(f, step, m.Data); err != nil {
		return nil, err
	}
	if len(u.delegated) > 0 {
		from := map[string]bool{}
		for _, a := range u.delegated {
			for _, id := range a.From {
				from[id] = true
			}
		}
		for _, c := range f.Plan.Earlier {
			if c.Statement.Session != st.Session || c.Statement.Plan == nil || *c.Statement.Plan != *ref ||
				!slices.ContainsFunc(c.Statement.Parents, func(p lineage.Parent) bool { return from[p.ID] }) {
				continue
			}
			m, err := lineage.MatchStep(step, c.Statement.Tool, c.Statement.Args)
			if err != nil {
				return nil, err
			}
			if m.OK {
				u.earlier++
			}
		}
	}
	data := map[string]bool{}
	for _, name := range m.Data {
		for _, id := range f.ArgSources[name] {
			data[id] = true
		}
	}
	u.control = []string{ref.ID}
	// A call that cites a plan lists its parents (it names no context by
	// reference), so these are all of them.
	for _, p := range st.Parents {
		if p.ID != ref.ID && !data[p.ID] {
			u.control = append(u.control, p.ID)
		}
	}
	return u, nil
}

// delegatedArgs are the delegated slots among the data arguments of a call
// that matches step, each with the sources that are its named source.
// Whether those sources excuse the argument, and what the call then gets,
// is the policy's to say.
func delegatedArgs(f *Facts, step lineage.PlanStep, data []string) (map[string]*delegatedArg, error) {
	ds, err := step.Delegations()
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	plan := f.Plan.Statement
	out := map[string]*delegatedArg{}
	for _, name := range data {
		d, ok := ds[name]
		if !ok {
			continue
		}
		a := &delegatedArg{Delegation: d, From: []string{}}
		if d.Entry == "" {
			a.Step = &plan.Steps[d.Step]
		}
		for _, id := range f.ArgSources[name] {
			if d.Entry != "" {
				if id == d.Entry {
					a.From = append(a.From, id)
				}
				continue
			}
			ok, err := stepOutput(f, id, d.Step)
			if err != nil {
				return nil, err
			}
			if ok {
				a.From = append(a.From, id)
			}
		}
		out[name] = a
	}
	return out, nil
}

// stepOutput reports whether source id is the output of a call in the
// call's session that cites step n of the plan and matches it (the step's
// literals fix what was read: a read of another file is not its output).
func stepOutput(f *Facts, id string, n int) (bool, error) {
	c, ok := f.Plan.Outputs[id]
	if !ok {
		return false, nil
	}
	st := c.Statement
	if st.Plan == nil || st.Plan.ID != f.Plan.ID || st.Plan.Step != n || st.Session != f.Statement.Session {
		return false, nil
	}
	m, err := lineage.MatchStep(f.Plan.Statement.Steps[n], st.Tool, st.Args)
	if err != nil {
		return false, err
	}
	return m.OK, nil
}

// slot says what an argument of a call under a plan is: "literal", "data",
// "delegated" (a data slot that names its source) or "" (no plan
// authority).
func (u *PlanUse) slot(name string) string {
	switch {
	case u == nil || !u.Authority:
		return ""
	case slices.Contains(u.literal, name):
		return "literal"
	case u.delegated[name] != nil:
		return "delegated"
	case slices.Contains(u.data, name):
		return "data"
	}
	return ""
}
