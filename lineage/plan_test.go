package lineage_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pedigree-ai/pedigree/lineage"
)

func TestMatchStep(t *testing.T) {
	steps, err := lineage.PlanSteps([]byte(`[{"tool":"email_send","args":{"to":"bob@example.com","body":{"$data":true},"n":1}}]`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool, args string
		ok         bool
		why        string
	}{
		{"email_send", `{"body":"x","n":1,"to":"bob@example.com"}`, true, ""},
		{"email_send", `{"n":1,"to":"bob@example.com"}`, true, ""},
		{"email_send", `{"body":"x","n":1,"to":"eve@evil.example"}`, false, `argument to is "eve@evil.example", the step's literal is "bob@example.com"`},
		{"email_send", `{"body":"x","n":"1","to":"bob@example.com"}`, false, `argument n is "1", the step's literal is 1`},
		{"email_send", `{"body":"x","n":1.0,"to":"bob@example.com"}`, false, `argument n is 1.0, the step's literal is 1`},
		{"email_send", `{"body":"x","to":"bob@example.com"}`, false, "the call leaves out the step's literal argument n"},
		{"email_send", `{"bcc":"eve","body":"x","n":1,"to":"bob@example.com"}`, false, "argument bcc is not in the step"},
		{"bank_transfer", `{}`, false, "the call's tool bank_transfer is not the step's email_send"},
	}
	for _, c := range cases {
		args, err := lineage.CanonicalArgs([]byte(c.args))
		if err != nil {
			t.Fatal(err)
		}
		m, err := lineage.MatchStep(steps[0], c.tool, args)
		if err != nil || m.OK != c.ok || m.Why != c.why {
			t.Errorf("%s %s: %+v %v, want ok=%v why %q", c.tool, c.args, m, err, c.ok, c.why)
		}
	}
}

func TestPlanStepsRefused(t *testing.T) {
	for name, raw := range map[string]string{
		"not an array":       `{"tool":"x","args":{}}`,
		"no steps":           `[]`,
		"$data with a key":   `[{"tool":"x","args":{"a":{"$data":true,"b":1}}}]`,
		"$data false":        `[{"tool":"x","args":{"a":{"$data":false}}}]`,
		"$data nested":       `[{"tool":"x","args":{"a":{"b":{"$data":true}}}}]`,
		"$data in a list":    `[{"tool":"x","args":{"a":[{"$data":true}]}}]`,
		"an unknown field":   `[{"tool":"x","args":{},"note":"n"}]`,
		"a bad tool":         `[{"tool":"","args":{}}]`,
		"args not an object": `[{"tool":"x","args":[1]}]`,
		"trailing data":      `[{"tool":"x","args":{}}] []`,
	} {
		if _, err := lineage.PlanSteps([]byte(raw)); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzPlanSteps: whatever PlanSteps accepts validates as a plan's steps,
// and every data slot is exactly the canonical slot.
func FuzzPlanSteps(f *testing.F) {
	for _, s := range []string{
		`[{"tool":"email_send","args":{"to":"bob@example.com","body":{"$data":true}}}]`,
		`[{"tool":"x","args":{"a":{"$data":true,"b":1}}}]`,
		`[{"tool":"x","args":{"a":[1,{"b":"$data"}]}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		steps, err := lineage.PlanSteps(raw)
		if err != nil {
			return
		}
		for _, st := range steps {
			var args map[string]json.RawMessage
			if err := json.Unmarshal(st.Args, &args); err != nil {
				t.Fatalf("accepted arguments that do not decode: %s", st.Args)
			}
			if m, err := lineage.MatchStep(st, st.Tool, st.Args); err != nil || !m.OK {
				t.Fatalf("a step does not match itself: %+v %v", m, err)
			}
		}
	})
}
