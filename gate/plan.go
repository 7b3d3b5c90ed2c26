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

// planUse judges a call's plan citation against the stored plan. A citation
// that names no stored plan of the call's session, or a step the plan does
// not have, is an error: the check fails closed.
func (g *Gate) planUse(st *lineage.Statement, argSources map[string][]string) (*PlanUse, error) {
	ref := st.Plan
	if ref == nil {
		return nil, nil
	}
	env, _, err := g.graph.Envelope(ref.ID)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", ref.ID[:12], err)
	}
	pst, _, _, err := lineage.Open(env)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", ref.ID[:12], err)
	}
	step, err := lineage.PlanStepOf(pst, ref.ID, st.Session, ref.Step)
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
	n, err := g.graph.Node(ref.ID)
	if err != nil {
		return nil, err
	}
	if !n.Effective.Trusted() {
		u.Why = fmt.Sprintf("the plan's effective tier is %s: it was made from untrusted content", n.Effective)
		return u, nil
	}
	u.Authority, u.literal, u.data = true, m.Literal, m.Data
	data := map[string]bool{}
	for _, name := range m.Data {
		for _, id := range argSources[name] {
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
