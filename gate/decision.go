package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Decision is the gate's answer, as logged and as printed.
type Decision struct {
	Version       int              `json:"version"`
	Decision      Outcome          `json:"decision"`
	ID            string           `json:"decision_id"`
	CallID        string           `json:"call_id"`
	Tool          string           `json:"tool"`
	Reasons       []string         `json:"reasons"`
	Untrusted     []lineage.Source `json:"untrusted"`
	Warnings      []string         `json:"warnings"`
	PolicyVersion string           `json:"policy_version"`
	Approval      string           `json:"approval,omitempty"`
	Principal     string           `json:"principal"`
	Session       string           `json:"session"`
	Time          string           `json:"time"`
	ArgsDigest    string           `json:"args_digest"`
	// Justification is what the call relied on: its parents as its
	// statement lists them, or the plan under a plan with authority. When
	// Context is set, the call relied first on the first Context.N entries
	// of its session's context, named by reference as its statement names
	// them (a version 2 decision), and Justification lists only what
	// follows them: a decision's record stays O(arguments), not O(context).
	// Whole gives the list with the reference expanded.
	Justification []string            `json:"justification"`
	Context       *lineage.ContextRef `json:"context,omitempty"`
	// Plan is the plan step the call cites, and whether it stood as the
	// control justification.
	Plan *PlanUse `json:"plan,omitempty"`
	// InputDigest is the sha256 of the policy input as logged, so that the
	// decision's ID covers what the policy saw.
	InputDigest string `json:"input_digest,omitempty"`

	// whole is the justification with Context expanded, when this
	// process knows it (the decision it made); nil otherwise.
	whole []string
}

// Whole is d's justification with its context reference expanded, when d
// was made in this process (NewDecision knew it) or read back one at a time
// through the engine (pedigree.Engine.Decision, which expands it from the
// call it decided on); otherwise, for a decision with a reference (one of a
// listing, one decoded from JSON), lineage.ErrUnexpanded.
func (d *Decision) Whole() ([]string, error) {
	if d.Context == nil {
		return d.Justification, nil
	}
	if d.whole == nil {
		return nil, lineage.ErrUnexpanded
	}
	return d.whole, nil
}

// SetWhole gives d, read back with a context reference, its expanded
// justification: the reference's entries (prefix), read and checked against
// its head by the caller, then the entries d lists.
func (d *Decision) SetWhole(prefix []string) {
	d.whole = append(slices.Clip(prefix), d.Justification...)
}

// NewDecision starts the decision on call statement st (whose entry is
// callID) at now: a deny until the policy says otherwise.
func (g *Gate) NewDecision(st *lineage.Statement, callID string, now time.Time) *Decision {
	d := &Decision{
		Version: 1, Decision: Deny, CallID: callID, Tool: st.Tool, Principal: st.Principal, Session: st.Session,
		Time: lineage.FormatTime(now), ArgsDigest: lineage.ActionDigest(st.Tool, st.Args),
		PolicyVersion: g.version, Reasons: []string{}, Warnings: []string{}, Untrusted: []lineage.Source{},
	}
	d.Justification = make([]string, 0, len(st.Parents))
	for _, p := range st.Parents {
		d.Justification = append(d.Justification, p.ID)
	}
	// A call that names its context by reference is decided on every
	// parent (Whole), and its record names them as the call does. A
	// statement whose reference was not resolved (refused before the graph
	// read it) has no known parents: the decision names the reference and
	// what the call lists, and the engine denies it.
	if st.Context != nil {
		ref := *st.Context
		d.Version, d.Context = 2, &ref
		if ps, err := st.AllParents(); err == nil {
			d.whole = make([]string, len(ps))
			for i, p := range ps {
				d.whole[i] = p.ID
			}
		}
	}
	return d
}

// FailClosed makes d a deny with cause as its one reason: what every failure
// to decide becomes.
func FailClosed(d *Decision, cause string) {
	d.Decision, d.Approval = Deny, ""
	d.Reasons = []string{"fail closed: " + cause}
	d.Warnings = []string{}
}

// Facts are what the engine read for one call, in one read transaction:
// the call and its node, where each argument came from, the node of every
// entry the call names (its justification and its arguments' sources) with
// the sources of its untrusted labels, the session's trajectory so far, and
// the approvals that could allow this exact action (each already checked
// against its signed entry).
type Facts struct {
	Statement  *lineage.Statement
	Call       *lineage.Node
	ArgSources map[string][]string
	Nodes      map[string]*lineage.Node
	Sources    map[string][]lineage.Source
	Trajectory *trajectory.State
	Approvals  []Approval
	// Plan is the stored plan the call cites (nil when it cites none): its
	// statement, read from its verified entry, and its node.
	Plan *PlanFact
	// Summarised says that the statement's parents are a prefix of its
	// session's context whose summary (lineage.Graph.Summary) says that
	// the entries missing from Nodes are trusted on every path: a gate
	// that is Lean leaves them out of the input, and needs only the others.
	Summarised bool
}

// PlanFact is a stored plan as the engine read it.
type PlanFact struct {
	ID        string
	Statement *lineage.Statement
	Node      *lineage.Node
	// Outputs maps each argument source whose one parent is a call citing
	// this plan to that call, read from its verified entry: what tells
	// whether a delegated value is the output of the step it names.
	Outputs map[string]lineage.StepCall
	// Earlier are the stored calls, other than this one, that cite the
	// same step (read from the plan-call index, each verified), when the
	// step has a delegated slot: a delegation holds once per step.
	Earlier []lineage.StepCall
}

// Approval is an approval offered to the policy.
type Approval struct {
	ID       string
	Approver string
	Tier     registry.Tier
	Expires  string
}

// Evaluation is what a decision leaves for the log: the policy input as
// logged (nil when it could not be built) and the trajectory step the call
// appends.
type Evaluation struct {
	Input []byte
	Step  *trajectory.Call

	in ast.Value // the input, until Encode
}

// Decide builds the policy input from f and evaluates the policy at now,
// filling in d: the gate's one evaluation, for a check, a dry run and a
// replay alike. An error means the gate could not decide: the caller makes d
// a deny (FailClosed) and logs it with whatever input was built. The input
// is encoded for the log only when Encode is called (the engine encodes an
// early allow's while the call is forwarded; a dry run never does).
func (g *Gate) Decide(ctx context.Context, f *Facts, d *Decision, now time.Time) (*Evaluation, error) {
	return g.decide(ctx, f, d, now)
}

// Encode fills in Input from the input the policy was given, once; it does
// nothing when there is none (it could not be built) or it is encoded.
func (ev *Evaluation) Encode() error {
	if ev.in == nil || ev.Input != nil {
		return nil
	}
	b, err := appendJSON(make([]byte, 0, 4096), ev.in)
	if err != nil {
		return err
	}
	ev.Input, ev.in = b, nil
	return nil
}

func (g *Gate) decide(ctx context.Context, f *Facts, d *Decision, now time.Time) (*Evaluation, error) {
	in, step, err := g.input(f, d)
	if err != nil {
		return &Evaluation{}, err
	}
	ev := &Evaluation{in: in}
	v, err := g.eval(ctx, in, now)
	if err != nil {
		return ev, err
	}
	d.Decision, d.Reasons, d.Approval = v.Decision, v.Reasons, ""
	d.Warnings = v.Warnings
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	if v.Approval != "" {
		if v.Decision != Allow || !approvalOffered(in, v.Approval) {
			return ev, errors.New("the policy named an approval that was not offered to it")
		}
		d.Approval = v.Approval
	}
	ev.Step = step
	return ev, nil
}

// Reevaluate runs the policy again on a logged input at the logged time.
// With the same policy version the outcome is the same: that is what makes
// the decision log auditable.
func (g *Gate) Reevaluate(ctx context.Context, input []byte, at time.Time) (Outcome, []string, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return "", nil, err
	}
	in, err := ast.InterfaceToValue(raw)
	if err != nil {
		return "", nil, err
	}
	// Evaluated again, never read from the memo.
	v, err := g.evalMemo(ctx, in, at, false)
	if err != nil {
		return Deny, []string{"fail closed: " + err.Error()}, nil
	}
	return v.Decision, v.Reasons, nil
}

// WholeInput returns a logged input with its justification whole: the
// default policy's input is lean (Gate.Lean: only the justification's
// untrusted entries, also as the sources of each argument that names none),
// and a policy with an operator's modules reads every entry, so
// re-evaluating a lean input under it needs the others back. justification
// are the nodes of the decision's justification, in its order; an entry the
// input leaves out must be trusted on every path (it has no untrusted
// sources), and every entry it lists must be among them. An input that
// lists them all is returned as it is.
func WholeInput(input []byte, justification []*lineage.Node) ([]byte, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	v, err := ast.InterfaceToValue(raw)
	if err != nil {
		return nil, err
	}
	in, ok := v.(ast.Object)
	if !ok {
		return nil, errors.New("the logged input is not an object")
	}
	lt := in.Get(str("justification"))
	if lt == nil {
		return nil, errors.New("the logged input has no justification")
	}
	listed, ok := lt.Value.(*ast.Array)
	if !ok {
		return nil, errors.New("the logged input's justification is not an array")
	}
	if listed.Len() == len(justification) {
		return input, nil
	}
	byID := map[string]*ast.Term{}
	for i := range listed.Len() {
		e, _ := listed.Elem(i).Value.(ast.Object)
		if e == nil || e.Get(str("id")) == nil {
			return nil, errors.New("the logged input's justification lists an entry without an ID")
		}
		id, _ := e.Get(str("id")).Value.(ast.String)
		byID[string(id)] = listed.Elem(i)
	}
	whole := make([]*ast.Term, 0, len(justification))
	for _, n := range justification {
		t := byID[n.ID]
		if t == nil {
			if !n.Effective.Trusted() || !n.Reach.Trusted() {
				return nil, fmt.Errorf("the logged input leaves out justification entry %s, which is not trusted", n.ID[:12])
			}
			t = entryTerm(n, nil)
		}
		delete(byID, n.ID)
		whole = append(whole, t)
	}
	if len(byID) > 0 {
		return nil, errors.New("the logged input lists an entry that is not in the decision's justification")
	}
	wholeTerm := ast.ArrayTerm(whole...)
	in.Insert(str("justification"), wholeTerm)
	if at := in.Get(str("arguments")); at != nil {
		args, ok := at.Value.(ast.Object)
		if !ok {
			return nil, errors.New("the logged input's arguments are not an object")
		}
		args.Foreach(func(_, a *ast.Term) {
			if o, ok := a.Value.(ast.Object); ok && ast.BooleanTerm(false).Equal(o.Get(str("explicit"))) {
				o.Insert(str("sources"), wholeTerm)
			}
		})
	}
	return appendJSON(nil, in)
}
