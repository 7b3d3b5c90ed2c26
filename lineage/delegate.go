package lineage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Delegation is the source a plan names for a data slot: the user asked
// for an action on data they pointed at ("pay the bill in bill.txt"), so
// the plan says where the value is to come from. A delegated slot is
// written {"$data": {"step": N}}, the output of the plan's earlier step N
// (the step that reads the file or the message the user named), or
// {"$data": {"entry": ID}}, one stored entry the user named.
//
// A call whose delegated argument comes from exactly that source (and from
// nothing else untrusted) is a delegated call: the policy asks a person to
// confirm the value, or does what the catalog's on_delegated says. The
// delegation makes no value trusted: whoever controls the source controls
// the value.
type Delegation struct {
	// Step is the earlier step whose output supplies the value, or -1.
	Step int `json:"step"`
	// Entry is the entry that supplies the value, or "".
	Entry string `json:"entry,omitempty"`
}

// FromStep is the canonical delegated slot of a plan argument whose value
// comes from the output of the plan's step n.
func FromStep(n int) json.RawMessage {
	return json.RawMessage(`{"$data":{"step":` + strconv.Itoa(n) + `}}`)
}

// FromEntry is the canonical delegated slot of a plan argument whose value
// comes from the stored entry id.
func FromEntry(id string) json.RawMessage {
	return json.RawMessage(`{"$data":{"entry":"` + id + `"}}`)
}

// String says where a delegated value comes from.
func (d Delegation) String() string {
	if d.Step >= 0 {
		return fmt.Sprintf("the output of plan step %d", d.Step)
	}
	return "entry " + d.Entry
}

// delegation reads a plan argument's canonical value: whether it is a
// delegated slot, and which. A value that is neither a slot nor a
// delegated one is (false, nil); one that has "$data" at its top and is not
// well formed is an error.
func delegation(v json.RawMessage) (Delegation, bool, error) {
	if !bytes.HasPrefix(v, []byte(`{"$data":{`)) {
		return Delegation{}, false, nil
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(v, &outer); err != nil || len(outer) != 1 {
		return Delegation{}, false, fmt.Errorf(`a delegated slot is exactly {"$data": {"step": N}} or {"$data": {"entry": ID}}`)
	}
	dec := json.NewDecoder(bytes.NewReader(outer["$data"]))
	dec.DisallowUnknownFields()
	var in struct {
		Step  *int    `json:"step"`
		Entry *string `json:"entry"`
	}
	if err := dec.Decode(&in); err != nil {
		return Delegation{}, false, fmt.Errorf(`a delegated slot names "step" or "entry": %v`, err)
	}
	switch {
	case (in.Step == nil) == (in.Entry == nil):
		return Delegation{}, false, fmt.Errorf(`a delegated slot names exactly one of "step" and "entry"`)
	case in.Step != nil && (*in.Step < 0 || *in.Step >= MaxPlanSteps):
		return Delegation{}, false, fmt.Errorf("a delegated slot's step %d is not a step number", *in.Step)
	case in.Entry != nil && !IsID(*in.Entry):
		return Delegation{}, false, fmt.Errorf("a delegated slot's entry %q is not a full entry ID", *in.Entry)
	case in.Step != nil:
		return Delegation{Step: *in.Step}, true, nil
	}
	return Delegation{Step: -1, Entry: *in.Entry}, true, nil
}

// Delegations are the step's delegated slots, by argument name.
func (st PlanStep) Delegations() (map[string]Delegation, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(st.Args, &args); err != nil {
		return nil, fmt.Errorf("%w: plan step arguments: %v", ErrMalformed, err)
	}
	var out map[string]Delegation
	for name, v := range args {
		d, ok, err := delegation(v)
		if err != nil {
			return nil, fmt.Errorf("%w: argument %s: %v", ErrMalformed, name, err)
		}
		if ok {
			if out == nil {
				out = map[string]Delegation{}
			}
			out[name] = d
		}
	}
	return out, nil
}

// checkDelegations checks that every delegated slot of step i names an
// earlier step: a step's output exists only once it has run.
func checkDelegations(steps []PlanStep) error {
	for i, st := range steps {
		ds, err := st.Delegations()
		if err != nil {
			return fmt.Errorf("plan step %d: %w", i, err)
		}
		for name, d := range ds {
			if d.Entry == "" && d.Step >= i {
				return fmt.Errorf("%w: plan step %d: argument %s is delegated to step %d, which is not an earlier step", ErrMalformed, i, name, d.Step)
			}
		}
	}
	return nil
}
