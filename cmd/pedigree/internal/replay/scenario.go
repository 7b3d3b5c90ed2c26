package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Scenario is one recorded session.
type Scenario struct {
	ID         string      `json:"id"`
	Source     string      `json:"source,omitempty"`
	Note       string      `json:"note,omitempty"`
	Principals []Principal `json:"principals"`
	Sensitive  []string    `json:"sensitive"`
	Steps      []Step      `json:"steps"`
	// ExpectError, our extension of the format, says the engine must refuse
	// the scenario with an error containing this text: then the error is
	// agreement and running to the end is a mismatch.
	ExpectError string `json:"expect_error,omitempty"`
}

// Principal is registered at bootstrap, in order.
type Principal struct {
	ID   string `json:"id"`
	Tier string `json:"tier"`
}

// Step is a record or a call. Session is our extension of the format: the
// session a step belongs to (default: the scenario's ID).
type Step struct {
	Op               string              `json:"op"`
	Ref              string              `json:"ref,omitempty"`
	Principal        string              `json:"principal,omitempty"`
	Kind             string              `json:"kind,omitempty"`
	Session          string              `json:"session,omitempty"`
	Content          string              `json:"content,omitempty"`
	Parents          []ParentRef         `json:"parents,omitempty"`
	Tool             string              `json:"tool,omitempty"`
	Args             json.RawMessage     `json:"args,omitempty"`
	Justification    []string            `json:"justification,omitempty"`
	ArgJustification map[string][]string `json:"arg_justification,omitempty"`
	// Plan and PlanStep: the plan step a call cites (op call). Steps: a
	// plan's steps (op plan), [{"tool", "args"}] with "$data" slots.
	Plan     string          `json:"plan,omitempty"`
	PlanStep *int            `json:"plan_step,omitempty"`
	Steps    json.RawMessage `json:"steps,omitempty"`
	Expect   string          `json:"expect,omitempty"`
	Label    string          `json:"label,omitempty"`
	Note     string          `json:"note,omitempty"`
}

// ParentRef is a derivation edge to an earlier step.
type ParentRef struct {
	Ref    string  `json:"ref"`
	Weight float64 `json:"weight"`
}

// MaxLine bounds one scenario line.
const MaxLine = 16 << 20

// ParseError is a line that is not a scenario.
type ParseError struct {
	Line int
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads scenarios, one JSON object a line; blank lines are skipped.
// A line that does not parse is returned as a *ParseError beside the
// scenarios that did, so that one bad line is reported, not fatal.
func Parse(r io.Reader) ([]Scenario, []error, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), MaxLine)
	var out []Scenario
	var bad []error
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		s, err := ParseLine(line)
		if err != nil {
			bad = append(bad, &ParseError{Line: n, Err: err})
			continue
		}
		out = append(out, *s)
	}
	if err := sc.Err(); err != nil {
		return out, bad, err
	}
	return out, bad, nil
}

// ParseLine decodes and checks one scenario, strictly.
func ParseLine(line []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the scenario")
	}
	return &s, s.check()
}

func (s *Scenario) check() error {
	if s.ID == "" {
		return errors.New("scenario without an id")
	}
	if len(s.Principals) == 0 {
		return fmt.Errorf("%s: no principals", s.ID)
	}
	refs := map[string]bool{}
	for i, st := range s.Steps {
		where := fmt.Sprintf("%s step %d", s.ID, i+1)
		switch st.Op {
		case "record", "call", "plan":
			if st.Ref == "" {
				return fmt.Errorf("%s: %s without a ref", where, st.Op)
			}
			if refs[st.Ref] {
				return fmt.Errorf("%s: ref %q used twice", where, st.Ref)
			}
			refs[st.Ref] = true
		default:
			return fmt.Errorf("%s: unknown op %q", where, st.Op)
		}
		for _, p := range st.Parents {
			if math.IsNaN(p.Weight) {
				return fmt.Errorf("%s: weight is not a number", where)
			}
		}
		switch st.Expect {
		case "", "allow", "deny", "ask":
		default:
			return fmt.Errorf("%s: expect %q (allow, deny or ask)", where, st.Expect)
		}
		switch st.Label {
		case "", "attack", "benign":
		default:
			return fmt.Errorf("%s: label %q (attack or benign)", where, st.Label)
		}
		if st.Op == "call" && st.Tool == "" {
			return fmt.Errorf("%s: call without a tool", where)
		}
		if (st.Plan == "") != (st.PlanStep == nil) || (st.Plan != "" && st.Op != "call") {
			return fmt.Errorf("%s: a call cites a plan with both plan and plan_step", where)
		}
		if st.Plan != "" && !refs[st.Plan] {
			return fmt.Errorf("%s: plan ref %q names no earlier step", where, st.Plan)
		}
		if (st.Op == "plan") != (st.Steps != nil) {
			return fmt.Errorf("%s: a plan, and only a plan, has steps", where)
		}
	}
	return nil
}
