package lineage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/pedigree-ai/pedigree/kv"
)

// ErrPlan: a call cites a plan step that cannot be used (not a plan, from
// another session, no such step).
var ErrPlan = errors.New("bad plan citation")

// PlanStepOf checks that st (the entry id) is a plan of session with a
// step n, and returns the step.
func PlanStepOf(st *Statement, id, session string, n int) (PlanStep, error) {
	switch {
	case st.Kind != KindPlan:
		return PlanStep{}, fmt.Errorf("%w: entry %s is a %s, not a plan", ErrPlan, id[:12], st.Kind)
	case st.Session != session:
		return PlanStep{}, fmt.Errorf("%w: plan %s belongs to session %q, not %q", ErrPlan, id[:12], st.Session, session)
	case n < 0 || n >= len(st.Steps):
		return PlanStep{}, fmt.Errorf("%w: plan %s has steps 0 to %d, not %d", ErrPlan, id[:12], len(st.Steps)-1, n)
	}
	return st.Steps[n], nil
}

// isSlot reports whether a step's canonical argument is a data slot, plain
// or delegated.
func isSlot(w json.RawMessage) bool {
	if string(w) == DataSlot {
		return true
	}
	_, ok, err := delegation(w)
	return ok && err == nil
}

// Match is how a call compares with the plan step it cites.
type Match struct {
	// OK: the tool is the step's, every literal is equal in canonical JSON,
	// and the call has no argument the step does not name.
	OK bool
	// Why says what differs when not OK.
	Why string
	// Literal and Data name the call's arguments that fill the step's
	// literals and its data slots (delegated ones included), sorted.
	Literal, Data []string
}

// MatchStep compares a call (tool and canonical arguments) with a plan
// step. A data slot the call leaves out is no mismatch; an argument the
// step does not name is.
func MatchStep(step PlanStep, tool string, args json.RawMessage) (Match, error) {
	var m Match
	var want, got map[string]json.RawMessage
	if err := json.Unmarshal(step.Args, &want); err != nil {
		return m, fmt.Errorf("%w: plan step arguments: %v", ErrMalformed, err)
	}
	if err := json.Unmarshal(args, &got); err != nil {
		return m, fmt.Errorf("%w: call arguments: %v", ErrMalformed, err)
	}
	if tool != step.Tool {
		m.Why = fmt.Sprintf("the call's tool %s is not the step's %s", tool, step.Tool)
		return m, nil
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, ok := want[n]
		switch {
		case !ok:
			m.Why = fmt.Sprintf("argument %s is not in the step", n)
			return m, nil
		case isSlot(w):
			m.Data = append(m.Data, n)
		case !bytes.Equal(w, got[n]):
			// Both sides are canonical, so bytes that differ are values
			// that differ, a type included ("100" is not 100).
			m.Why = fmt.Sprintf("argument %s is %s, the step's literal is %s", n, got[n], w)
			return m, nil
		default:
			m.Literal = append(m.Literal, n)
		}
	}
	for n, w := range want {
		if _, ok := got[n]; !ok && !isSlot(w) {
			m.Why = fmt.Sprintf("the call leaves out the step's literal argument %s", n)
			return m, nil
		}
	}
	m.OK = true
	return m, nil
}

// StatementIn reads a stored entry inside t and verifies its envelope
// against the frozen registry: what a check may rely on (the plan a call
// cites; whether it is a plan of the call's session with that step is
// PlanStepOf's to say) and what a review row is checked against.
func (g *Graph) StatementIn(t kv.Txn, id string) (*Statement, error) {
	env, err := t.Get(key(pEnvelope, id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("%w %s", ErrUnknownEntry, id)
	}
	if err != nil {
		return nil, err
	}
	st, _, gotID, err := g.verify(env)
	if err != nil {
		return nil, err
	}
	if gotID != id {
		return nil, fmt.Errorf("%w: entry %s is not the entry it is stored as", ErrMalformed, id)
	}
	return st, nil
}
