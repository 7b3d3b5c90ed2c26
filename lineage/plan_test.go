package lineage_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
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

// A plan has 1 to MaxPlanSteps steps.
func TestPlanStepsCount(t *testing.T) {
	steps := func(n int) []byte {
		return []byte("[" + strings.TrimSuffix(strings.Repeat(`{"tool":"x","args":{}},`, n), ",") + "]")
	}
	if got, err := lineage.PlanSteps(steps(lineage.MaxPlanSteps)); err != nil || len(got) != lineage.MaxPlanSteps {
		t.Fatalf("%d steps: %d, %v", lineage.MaxPlanSteps, len(got), err)
	}
	for _, n := range []int{0, lineage.MaxPlanSteps + 1} {
		if _, err := lineage.PlanSteps(steps(n)); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("%d steps: %v, want ErrMalformed", n, err)
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
		`[{"tool":"x","args":{}},{"tool":"y","args":{"a":{"$data":{"step":0}},"b":{"$data":{"entry":"` + strings.Repeat("ab", 32) + `"}}}}]`,
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

// StatementIn and ApprovalIn return a stored entry only once its envelope
// verifies against the registry and hashes to the ID it is stored under:
// a row in the store proves nothing by itself.
func TestStatementIn(t *testing.T) {
	w := newWorld(t)
	mem := w.record("agent:planner", "s", "memory", nil)
	other := w.record("agent:planner", "s", "other", nil)
	st := w.statement("user:alice", "s", "", nil)
	st.Kind, st.Approval = lineage.KindApproval, &lineage.Grant{Decision: strings.Repeat("ab", 32), Action: strings.Repeat("cd", 32), Expires: "2026-11-30T12:00:00Z"}
	approval, err := w.store(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(g *lineage.Graph, id string) (*lineage.Statement, *lineage.Statement, error, error) {
		var s, a *lineage.Statement
		var serr, aerr error
		if err := w.space().View(func(tx kv.Txn) error {
			s, serr = g.StatementIn(tx, id)
			a, _, aerr = g.ApprovalIn(tx, id)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return s, a, serr, aerr
	}
	if s, _, err, aerr := read(w.g, mem.ID); err != nil || s.ContentDigest != lineage.DigestContent([]byte("memory")) || !errors.Is(aerr, lineage.ErrMalformed) {
		t.Fatalf("a memory: %+v %v; as an approval: %v", s, err, aerr)
	}
	if _, a, err, aerr := read(w.g, approval.ID); err != nil || aerr != nil || a.Approval.Decision != st.Approval.Decision {
		t.Fatalf("the approval: %+v %v %v", a, err, aerr)
	}
	if _, _, err, aerr := read(w.g, strings.Repeat("ef", 32)); !errors.Is(err, lineage.ErrUnknownEntry) || !errors.Is(aerr, lineage.ErrUnknownEntry) {
		t.Fatalf("an unknown entry: %v %v", err, aerr)
	}
	// The memory's row holds the other entry's envelope; the approval's a
	// flipped signature.
	w.tamper(func(tx kv.Txn) error {
		env, err := tx.Get([]byte("e/" + other.ID))
		if err != nil {
			return err
		}
		if err := tx.Set([]byte("e/"+mem.ID), env); err != nil {
			return err
		}
		env, err = tx.Get([]byte("e/" + approval.ID))
		if err != nil {
			return err
		}
		i := strings.LastIndex(string(env), `"sig":"`) + 10
		env[i] ^= 1
		return tx.Set([]byte("e/"+approval.ID), env)
	})
	if _, _, err, aerr := read(w.g, mem.ID); !errors.Is(err, lineage.ErrMalformed) || !errors.Is(aerr, lineage.ErrMalformed) {
		t.Fatalf("an envelope stored under another ID: %v %v", err, aerr)
	}
	if _, _, err, aerr := read(w.g, approval.ID); !errors.Is(err, registry.ErrBadSignature) || !errors.Is(aerr, registry.ErrBadSignature) {
		t.Fatalf("a flipped signature: %v %v", err, aerr)
	}
	if _, _, err := w.g.OpenVerified(mustGetEnv(t, w, approval.ID)); !errors.Is(err, registry.ErrBadSignature) {
		t.Fatalf("OpenVerified of a flipped signature: %v", err)
	}
	if st, id, err := w.g.OpenVerified(mustGetEnv(t, w, other.ID)); err != nil || id != other.ID || st.Principal != "agent:planner" {
		t.Fatalf("OpenVerified: %+v %s %v", st, id, err)
	}
}

func mustGetEnv(t *testing.T, w *world, id string) []byte {
	t.Helper()
	env, _, err := w.g.Envelope(id)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestPlanStepOf(t *testing.T) {
	steps, err := lineage.PlanSteps([]byte(`[{"tool":"a","args":{}},{"tool":"b","args":{}}]`))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("ab", 32)
	plan := &lineage.Statement{Kind: lineage.KindPlan, Session: "s", Steps: steps}
	for n, tool := range []string{"a", "b"} {
		if st, err := lineage.PlanStepOf(plan, id, "s", n); err != nil || st.Tool != tool {
			t.Errorf("step %d: %+v %v", n, st, err)
		}
	}
	for name, c := range map[string]struct {
		st      *lineage.Statement
		session string
		n       int
	}{
		"not a plan":       {&lineage.Statement{Kind: lineage.KindMemory, Session: "s"}, "s", 0},
		"another session":  {plan, "t", 0},
		"a step past them": {plan, "s", 2},
		"a negative step":  {plan, "s", -1},
	} {
		if _, err := lineage.PlanStepOf(c.st, id, c.session, c.n); !errors.Is(err, lineage.ErrPlan) {
			t.Errorf("%s: %v, want ErrPlan", name, err)
		}
	}
	// The refusal says which steps there are: what a person fixes the
	// call with (the CLI prints it as it is).
	if _, err := lineage.PlanStepOf(plan, id, "s", 2); err == nil || !strings.HasSuffix(err.Error(), "has steps 0 to 1, not 2") {
		t.Errorf("a step past them: %v", err)
	}
}

// A delegated slot names the earlier step, or the entry, its value is to
// come from; it is a data slot for matching, and anything else that looks
// like one is refused.
func TestPlanStepsDelegated(t *testing.T) {
	id := strings.Repeat("ab", 32)
	steps, err := lineage.PlanSteps([]byte(`[{"tool":"file_read","args":{"path":"bill.txt"}},
		{"tool":"bank_transfer","args":{"iban":{"$data":{"step":0}},"amount":{"$data":{"step":0}},"memo":{"$data":true},"ref":{"$data":{"entry":"` + id + `"}}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(steps[1].Args), `{"amount":`+string(lineage.FromStep(0))+`,"iban":`+string(lineage.FromStep(0))+`,"memo":{"$data":true},"ref":`+string(lineage.FromEntry(id))+`}`; got != want {
		t.Fatalf("canonical step %s, want %s", got, want)
	}
	ds, err := steps[1].Delegations()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]lineage.Delegation{"iban": {Step: 0}, "amount": {Step: 0}, "ref": {Step: -1, Entry: id}}
	if len(ds) != len(want) {
		t.Fatalf("delegations %+v, want %+v", ds, want)
	}
	for n, d := range want {
		if ds[n] != d {
			t.Errorf("delegation of %s: %+v, want %+v", n, ds[n], d)
		}
	}
	if ds, err := steps[0].Delegations(); err != nil || ds != nil {
		t.Errorf("a step without delegated slots: %v %v", ds, err)
	}
	args, _ := lineage.CanonicalArgs([]byte(`{"iban":"DE89","amount":120,"memo":"x","ref":"r"}`))
	m, err := lineage.MatchStep(steps[1], "bank_transfer", args)
	if err != nil || !m.OK || strings.Join(m.Data, ",") != "amount,iban,memo,ref" {
		t.Errorf("match %+v %v, want every argument a data slot", m, err)
	}
	for name, raw := range map[string]string{
		"a later step":      `[{"tool":"x","args":{"a":{"$data":{"step":1}}}},{"tool":"y","args":{}}]`,
		"its own step":      `[{"tool":"x","args":{"a":{"$data":{"step":0}}}}]`,
		"a negative step":   `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":-1}}}}]`,
		"a step too far":    `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":99999}}}}]`,
		"a string step":     `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":"0"}}}}]`,
		"a fractional step": `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":0.5}}}}]`,
		"step and entry":    `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":0,"entry":"` + id + `"}}}}]`,
		"neither":           `[{"tool":"x","args":{"a":{"$data":{}}}}]`,
		"an unknown key":    `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":0,"why":"x"}}}}]`,
		"an entry prefix":   `[{"tool":"x","args":{"a":{"$data":{"entry":"abab"}}}}]`,
		"a key beside":      `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"$data":{"step":0},"b":1}}}]`,
		"nested":            `[{"tool":"y","args":{}},{"tool":"x","args":{"a":{"b":{"$data":{"step":0}}}}}]`,
	} {
		if _, err := lineage.PlanSteps([]byte(raw)); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// A signed plan is checked as PlanSteps checks one: a slot delegated to a
// step that is not earlier is malformed, whoever made the statement.
func TestPlanStatementDelegation(t *testing.T) {
	w := newWorld(t)
	prompt := w.record("user:alice", "s", "pay the bill", nil)
	st := w.statement("agent:planner", "s", "", []lineage.Parent{{ID: prompt.ID, Weight: 1}})
	st.Kind = lineage.KindPlan
	st.Steps = []lineage.PlanStep{{Tool: "file_read", Args: json.RawMessage(`{"path":"bill.txt"}`)}, {Tool: "pay", Args: json.RawMessage(`{"iban":` + string(lineage.FromStep(0)) + `}`)}}
	if err := st.Validate(); err != nil {
		t.Fatalf("a slot delegated to an earlier step: %v", err)
	}
	st.Steps[1].Args = json.RawMessage(`{"iban":` + string(lineage.FromStep(1)) + `}`)
	if err := st.Validate(); !errors.Is(err, lineage.ErrMalformed) || !strings.Contains(err.Error(), "not an earlier step") {
		t.Fatalf("a slot delegated to its own step: %v", err)
	}
}
