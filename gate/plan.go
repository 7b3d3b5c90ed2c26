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
	data := map[string]bool{}
	for _, name := range m.Data {
		for _, id := range f.ArgSources[name] {
			data[id] = true
		}
	}
	u.control = []string{ref.ID}
	for _, p := range st.Parents {
		if p.ID != ref.ID && !data[p.ID] {
			u.control = append(u.control, p.ID)
		}
	}
	return u, nil
}

// slot says what an argument of a call under a plan is: "literal", "data"
// or "" (no plan authority).
func (u *PlanUse) slot(name string) string {
	switch {
	case u == nil || !u.Authority:
		return ""
	case slices.Contains(u.literal, name):
		return "literal"
	case slices.Contains(u.data, name):
		return "data"
	}
	return ""
}
