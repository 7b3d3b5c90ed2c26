package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// The policy input, built directly as an OPA value: converting a Go map
// (or worse, a struct through JSON) on every check cost more than the
// evaluation itself.
//
//	action:        {tool, args, args_digest, principal, principal_tier, session, call_id}
//	tool:          {known, sensitive (true, false or "unknown"), irreversible, external_sink, role, ask_on_untrusted, on_steered, on_delegated, args: {NAME: {trusted}}}
//	justification: [entry]: with the default policy, only the entries with an
//	               untrusted effective or reach tier (the others yield no finding,
//	               so a session's long trusted context is not the policy's work);
//	               with an operator's modules (PolicyFromDir), every entry
//	arguments:     {NAME: {explicit, sources: [entry], slot, delegation}}
//	trajectory:    {features: {NAME: number}, alerts: [{rule, message, at}]}
//	approvals:     [{id, approver, approver_tier, expires}]
//	plan:          {cited, id, step, authority, why, earlier}
//
// slot is "literal", "data" or "delegated" for an argument of a call a plan
// has authority over (see PlanUse), else "". A delegated argument also has
// delegation: the source its plan step names, {step, tool, args} (the
// step's tool and arguments) or {entry}, and from, the IDs of its sources
// that are that source (its output, or the entry itself). plan.earlier
// counts the other calls of the session that carried out the same step,
// when it has delegated slots (else 0).
//
// where entry is {id, principal, kind, tier, effective_tier, reach_tier,
// untrusted: [{id, principal, tier, hops, strong}]}.

func str(s string) *ast.Term { return ast.StringTerm(s) }

// word is the term of a value the input repeats (see valueTerms).
func word(s string) *ast.Term {
	if t, ok := valueTerms[s]; ok {
		return t
	}
	return str(s)
}

// keyTerms are the input's and the verdict's field names, made once: every
// check's input has dozens of them. valueTerms are the values the input
// repeats (tiers, kinds, roles, slots), likewise.
var keyTerms, valueTerms = map[string]*ast.Term{}, map[string]*ast.Term{}

func init() {
	for _, v := range []string{
		registry.Internal.String(), registry.User.String(), registry.Unverified.String(), registry.External.String(),
		string(lineage.KindPrompt), string(lineage.KindToolOutput), string(lineage.KindMemory), string(lineage.KindSummary),
		string(lineage.KindRetrieval), string(lineage.KindCall), string(lineage.KindApproval), string(lineage.KindRejection), string(lineage.KindPlan),
		string(trajectory.Recall), string(trajectory.List), string(trajectory.Save), string(trajectory.Draft), string(trajectory.Send),
		string(trajectory.RAG), string(trajectory.Other), "", "literal", "data", "delegated", "unknown", string(Allow), string(Deny), string(Ask),
	} {
		valueTerms[v] = ast.StringTerm(v)
	}
	for _, k := range []string{
		"action", "tool", "args", "args_digest", "principal", "principal_tier", "session", "call_id",
		"known", "sensitive", "irreversible", "external_sink", "role", "ask_on_untrusted", "on_steered", "on_delegated", "trusted",
		"justification", "arguments", "explicit", "sources", "slot", "trajectory", "features", "alerts", "rule", "message", "at",
		"approvals", "approver", "approver_tier", "expires", "plan", "cited", "step", "authority", "why", "delegation", "from", "earlier",
		"id", "kind", "tier", "effective_tier", "reach_tier", "untrusted", "hops", "strong",
		"decision", "reasons", "findings", "warnings", "approval", "arg", "entry", "outcome", "by", "reason",
	} {
		keyTerms[k] = ast.StringTerm(k)
	}
}

// key is the term of field name k.
func keyOf(k string) *ast.Term {
	if t, ok := keyTerms[k]; ok {
		return t
	}
	return str(k)
}

// obj is the object of the field names and terms kv alternates.
func obj(kv ...any) *ast.Term {
	items := make([][2]*ast.Term, len(kv)/2)
	for i := range items {
		items[i] = [2]*ast.Term{keyOf(kv[2*i].(string)), kv[2*i+1].(*ast.Term)}
	}
	return ast.ObjectTerm(items...)
}

// input builds the policy input from the facts. It returns the trajectory
// call that the decision will append.
func (g *Gate) input(f *Facts, d *Decision) (ast.Value, *trajectory.Call, error) {
	st, call := f.Statement, f.Call
	tool, known := g.catalog.Lookup(st.Tool)
	dec := json.NewDecoder(bytes.NewReader(st.Args))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, nil, fmt.Errorf("call arguments: %v", err)
	}
	for n := range f.ArgSources {
		if _, ok := args[n]; !ok {
			return nil, nil, fmt.Errorf("provenance given for argument %q, which the call does not have", n)
		}
	}
	plan, err := g.planUse(f)
	if err != nil {
		return nil, nil, err
	}
	if plan != nil {
		if plan.Authority {
			// (A call that cites a plan lists its parents: it names no
			// context reference.)
			d.Justification, d.Context, d.whole, d.Version = plan.control, nil, nil, 1
		}
		d.Plan = plan
	}
	entries := make(map[string]*ast.Term, len(f.Nodes))
	term := func(id string) (*ast.Term, error) {
		if t, ok := entries[id]; ok {
			return t, nil
		}
		n, ok := f.Nodes[id]
		if !ok {
			return nil, fmt.Errorf("%w %s", lineage.ErrUnknownEntry, id)
		}
		t := entryTerm(n, f.Sources[id])
		entries[id] = t
		return t, nil
	}
	d.Untrusted = d.Untrusted[:0]
	whole, err := d.Whole()
	if err != nil {
		return nil, nil, err
	}
	just := make([]*ast.Term, 0, min(len(whole), 64))
	for _, id := range whole {
		n, ok := f.Nodes[id]
		if !ok && g.lean && f.Summarised && plan == nil {
			continue // trusted on every path (Facts.Summarised)
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w %s", lineage.ErrUnknownEntry, id)
		}
		if g.lean && n.Effective.Trusted() && n.Reach.Trusted() {
			// Trusted on every path: the default policy finds nothing on
			// it (and it has no untrusted sources), so a long session's
			// context costs the policy only its untrusted entries.
			continue
		}
		t, err := term(id)
		if err != nil {
			return nil, nil, err
		}
		just = append(just, t)
		for _, s := range f.Sources[id] {
			s.Path = append([]string{call.ID}, s.Path...)
			d.Untrusted = append(d.Untrusted, s)
		}
	}
	justTerm := ast.ArrayTerm(just...)

	names := make([]string, 0, len(args))
	for n := range args {
		names = append(names, n)
	}
	slices.Sort(names)
	arguments := make([][2]*ast.Term, 0, len(names))
	recipientUntrusted := false
	for _, name := range names {
		ids, explicit := f.ArgSources[name]
		slot := plan.slot(name)
		if slot == "literal" {
			// The plan fixed the value: the plan is its source.
			ids, explicit = []string{plan.ID}, true
		}
		if slot == "data" || slot == "delegated" {
			// Data sources are not in the control justification: their
			// untrusted roots are evidence of their own.
			for _, id := range ids {
				for _, s := range f.Sources[id] {
					s.Path = append([]string{call.ID}, s.Path...)
					d.Untrusted = append(d.Untrusted, s)
				}
			}
		}
		srcs := justTerm
		srcIDs := whole
		if explicit {
			ts := make([]*ast.Term, len(ids))
			for i, id := range ids {
				t, err := term(id)
				if err != nil {
					return nil, nil, err
				}
				ts[i] = t
			}
			srcs, srcIDs = ast.ArrayTerm(ts...), ids
		}
		if name == tool.RecipientArg {
			for _, id := range srcIDs {
				// (An entry left out of Nodes is trusted: see above.)
				if n := f.Nodes[id]; n != nil && !n.Effective.Trusted() {
					recipientUntrusted = true
				}
			}
		}
		fields := []any{"explicit", ast.InternedTerm(explicit), "sources", srcs, "slot", word(slot)}
		if slot == "delegated" {
			dt, err := delegationTerm(plan.delegated[name])
			if err != nil {
				return nil, nil, err
			}
			fields = append(fields, "delegation", dt)
		}
		arguments = append(arguments, [2]*ast.Term{str(name), obj(fields...)})
	}

	// The trajectory as it will be once this call is appended.
	tc := g.catalog.TrajectoryCall(st.Tool, args)
	tc.RecipientUntrusted = tc.Role == trajectory.Send && recipientUntrusted
	state := f.Trajectory
	if state == nil {
		state = &trajectory.State{}
	}
	alerts := state.Observe(tc, g.model)
	approvals := make([]*ast.Term, 0, len(f.Approvals))
	for _, a := range f.Approvals {
		approvals = append(approvals, obj("id", str(a.ID), "approver", str(a.Approver), "approver_tier", str(a.Tier.String()), "expires", str(a.Expires)))
	}
	argsVal, err := ast.InterfaceToValue(args)
	if err != nil {
		return nil, nil, fmt.Errorf("call arguments: %v", err)
	}
	in := obj(
		"action", obj("tool", str(st.Tool), "args", ast.NewTerm(argsVal), "args_digest", str(d.ArgsDigest),
			"principal", str(st.Principal), "principal_tier", word(call.Tier.String()), "session", str(st.Session), "call_id", str(call.ID)),
		"tool", toolTerm(tool, known),
		"justification", justTerm,
		"arguments", ast.ObjectTerm(arguments...),
		"trajectory", obj("features", featuresTerm(state), "alerts", alertsTerm(alerts)),
		"approvals", ast.ArrayTerm(approvals...),
		"plan", planTerm(plan),
	)
	return in.Value, &tc, nil
}

// delegationTerm is a delegated argument's named source and which of its
// sources are that source: {step, tool, args, from} or {entry, from}.
func delegationTerm(a *delegatedArg) (*ast.Term, error) {
	from := make([]*ast.Term, len(a.From))
	for i, id := range a.From {
		from[i] = str(id)
	}
	if a.Step == nil {
		return obj("entry", str(a.Entry), "from", ast.ArrayTerm(from...)), nil
	}
	dec := json.NewDecoder(bytes.NewReader(a.Step.Args))
	dec.UseNumber()
	var args any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("plan step %d: %v", a.Delegation.Step, err)
	}
	v, err := ast.InterfaceToValue(args)
	if err != nil {
		return nil, fmt.Errorf("plan step %d: %v", a.Delegation.Step, err)
	}
	return obj("step", ast.IntNumberTerm(a.Delegation.Step), "tool", str(a.Step.Tool), "args", ast.NewTerm(v), "from", ast.ArrayTerm(from...)), nil
}

func planTerm(u *PlanUse) *ast.Term {
	if u == nil {
		return obj("cited", ast.InternedTerm(false))
	}
	return obj("cited", ast.InternedTerm(true), "id", str(u.ID), "step", ast.IntNumberTerm(u.Step),
		"authority", ast.InternedTerm(u.Authority), "why", str(u.Why), "earlier", ast.InternedTerm(u.earlier))
}

func entryTerm(n *lineage.Node, srcs []lineage.Source) *ast.Term {
	// The path to each root is the decision's explanation, not policy
	// input: it would be most of the input's size and of its logging.
	untrusted := make([]*ast.Term, 0, len(srcs))
	for _, s := range srcs {
		untrusted = append(untrusted, obj("id", str(s.ID), "principal", str(s.Principal), "tier", word(s.Tier.String()),
			"hops", ast.InternedTerm(len(s.Path)-1), "strong", ast.InternedTerm(s.Strong)))
	}
	return obj("id", str(n.ID), "principal", str(n.Principal), "kind", word(string(n.Kind)), "tier", word(n.Tier.String()),
		"effective_tier", word(n.Effective.String()), "reach_tier", word(n.Reach.String()), "untrusted", ast.ArrayTerm(untrusted...))
}

func toolTerm(t Tool, known bool) *ast.Term {
	args := make([][2]*ast.Term, 0, len(t.Args))
	for name, r := range t.Args {
		args = append(args, [2]*ast.Term{str(name), obj("trusted", ast.InternedTerm(r.Trusted))})
	}
	// A catalog entry that does not say is "unknown", never false: only an
	// explicit `sensitive: false` lets the policy skip the checks.
	sens := word("unknown")
	if t.Sensitive != nil {
		sens = ast.InternedTerm(*t.Sensitive)
	}
	return obj("known", ast.InternedTerm(known), "sensitive", sens, "irreversible", ast.InternedTerm(t.Irreversible),
		"external_sink", ast.InternedTerm(t.ExternalSink), "role", word(string(t.Role)), "ask_on_untrusted", ast.InternedTerm(t.AskOnUntrusted),
		"on_steered", word(string(t.OnSteered)), "on_delegated", word(string(t.OnDelegated)), "args", ast.ObjectTerm(args...))
}

func featuresTerm(s *trajectory.State) *ast.Term {
	f := s.Features()
	items := make([][2]*ast.Term, len(f))
	for i, v := range f {
		items[i] = [2]*ast.Term{featureKeys[i], number(v)}
	}
	return ast.ObjectTerm(items...)
}

// featureKeys are the trajectory features' names as terms.
var featureKeys = func() []*ast.Term {
	out := make([]*ast.Term, len(trajectory.FeatureNames))
	for i, n := range trajectory.FeatureNames {
		out[i] = ast.StringTerm(n)
	}
	return out
}()

// number is v as a term, with FloatNumberTerm's text. Most features are
// small counts: an integer below a million in magnitude has the same text
// as an integer term (from a million on, FloatNumberTerm writes 1e+06), and
// OPA holds the small ones interned.
func number(v float64) *ast.Term {
	if i := int(v); float64(i) == v && math.Abs(v) < 1e6 {
		return ast.InternedTerm(i)
	}
	return ast.FloatNumberTerm(v)
}

func alertsTerm(alerts []trajectory.Alert) *ast.Term {
	out := make([]*ast.Term, len(alerts))
	for i, a := range alerts {
		out[i] = obj("rule", str(a.Rule), "message", str(a.Message), "at", ast.IntNumberTerm(a.At))
	}
	return ast.ArrayTerm(out...)
}

// approvalOffered reports whether the input offered the approval id.
func approvalOffered(in ast.Value, id string) bool {
	o, ok := in.(ast.Object)
	if !ok {
		return false
	}
	arr, ok := o.Get(str("approvals")).Value.(*ast.Array)
	if !ok {
		return false
	}
	found := false
	arr.Foreach(func(t *ast.Term) {
		if a, ok := t.Value.(ast.Object); ok {
			if v := a.Get(str("id")); v != nil && v.Equal(str(id)) {
				found = true
			}
		}
	})
	return found
}
