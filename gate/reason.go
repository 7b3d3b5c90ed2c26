package gate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The default policy decides and names what it decided on (findings: a rule
// and the argument, entry or approval it fired on); the gate writes the
// reasons people read from those findings and the input the policy saw.
// Strings built in Rego cost more than the rest of the evaluation; here
// they cost a few allocations, and only the reasons of the rules that fired.

// A reason's place in the list: the rule that settled the decision first,
// then the rules that blocked it, then the tainted control, then the plan,
// then what an approval overrode. Reasons of one rank are sorted.
var reasonRank = map[string]int{
	"untrusted-proposer": 0, "not-sensitive": 0, "approved": 0, "steered": 0, "trusted": 0,
	"untrusted-argument": 1, "unsourced-argument": 1, "empty-sources": 1, "unsourced-data": 1,
	"no-protected-argument": 1, "weak-justification": 1, "weak-argument": 1, "extension": 1, "delegated": 1, "delegated-repeat": 1,
	"tainted-justification": 2,
	"plan-used":             3, "plan-unused": 3,
	"overridden": 4,
}

// findingFields are the fields a finding may have besides its rule.
var findingFields = map[string]bool{"arg": true, "entry": true, "approval": true, "outcome": true, "sources": true, "by": true, "reason": true}

type rankedReason struct {
	rank int
	text string
}

// reasonWriter writes findings on input in.
type reasonWriter struct {
	in      ast.Object
	entries map[string]ast.Object
	// err is the first error met while writing the current reason.
	err error
}

// writeReasons turns the policy's findings into reasons, ranked, sorted in
// each rank, each once (the policy's rules yielded sets of strings before).
func writeReasons(in ast.Value, findings []*ast.Term) ([]string, error) {
	o, ok := in.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("the input is a %T, not an object", in)
	}
	w := &reasonWriter{in: o}
	out := make([]rankedReason, 0, len(findings))
	for i, f := range findings {
		r, err := w.finding(f.Value, false)
		if err != nil {
			return nil, fmt.Errorf("findings[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b rankedReason) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.text, b.text))
	})
	reasons := make([]string, 0, len(out))
	for i, r := range out {
		if i == 0 || r != out[i-1] {
			reasons = append(reasons, r.text)
		}
	}
	return reasons, nil
}

// finding writes one finding. An approval overrides only the rules that
// block a call and the tainted control.
func (w *reasonWriter) finding(v ast.Value, overridden bool) (rankedReason, error) {
	f, ok := v.(ast.Object)
	if !ok {
		return rankedReason{}, fmt.Errorf("a finding is a %s, not an object", ast.ValueName(v))
	}
	rule, err := stringField(f, "rule")
	if err != nil {
		return rankedReason{}, err
	}
	rank, ok := reasonRank[rule]
	if !ok {
		return rankedReason{}, fmt.Errorf("unknown rule %q", rule)
	}
	if overridden && rank != 1 && rank != 2 {
		return rankedReason{}, fmt.Errorf("an approval cannot override rule %s", rule)
	}
	for _, k := range f.Keys() {
		if s, ok := k.Value.(ast.String); !ok || (s != "rule" && !findingFields[string(s)]) {
			return rankedReason{}, fmt.Errorf("rule %s: unknown field %v", rule, k)
		}
	}
	text, err := w.text(rule, f)
	if err != nil {
		return rankedReason{}, fmt.Errorf("rule %s: %w", rule, err)
	}
	return rankedReason{rank, text}, nil
}

func (w *reasonWriter) text(rule string, f ast.Object) (string, error) {
	var text string
	switch rule {
	case "untrusted-proposer":
		a := w.object(w.in, "action")
		text = rule + ": the call is proposed by " + w.str(a, "principal_tier") + " principal " + w.str(a, "principal") + ": an untrusted principal may not propose calls"
	case "not-sensitive":
		text = rule + ": tool " + w.str(w.object(w.in, "action"), "tool") + " is not sensitive"
	case "trusted":
		text = rule + ": every justification and protected argument is trusted"
	case "approved":
		a := w.approval(f)
		text = "approved once by " + w.str(a, "approver") + " (approval " + short(w.str(a, "id")) + ")"
	case "overridden":
		by, ok := valueOf(f, "by").(ast.Object)
		if !ok {
			return "", errors.New("field by is not a finding")
		}
		r, err := w.finding(by, true)
		if err != nil {
			return "", err
		}
		text = "overridden by the approval: " + r.text
	case "steered":
		text = w.steered(f)
	case "untrusted-argument":
		e := w.entry(f)
		text = rule + ": argument " + w.str(f, "arg") + " comes from " + short(w.str(e, "id")) + " (" + w.str(e, "principal") + "), which " + w.describe(e)
	case "delegated":
		text = w.delegated(f)
	case "delegated-repeat":
		p := w.object(w.in, "plan")
		text = rule + ": plan " + short(w.str(p, "id")) + " step " + w.integer(p, "step") + " was carried out already, from the same source (earlier calls: " + w.integer(p, "earlier") +
			"): argument " + w.str(f, "arg") + " is delegated to its source once, so this call is judged without the delegation"
	case "unsourced-argument":
		text = rule + ": protected argument " + w.str(f, "arg") + " has no provenance of its own: it comes from the tainted justification"
	case "empty-sources":
		text = rule + ": protected argument " + w.str(f, "arg") + " has an empty source list: the agent composed it in a tainted context"
	case "unsourced-data":
		text = rule + ": protected argument " + w.str(f, "arg") + " fills a data slot of the plan but names no source"
	case "no-protected-argument":
		text = rule + ": the call has no protected argument: nothing vouches for it but the tainted justification"
	case "weak-justification":
		e := w.entry(f)
		text = rule + ": justification " + short(w.str(e, "id")) + " has an untrusted ancestor through a weak edge only (reach tier " + w.str(e, "reach_tier") + ")"
	case "weak-argument":
		e := w.entry(f)
		text = rule + ": argument " + w.str(f, "arg") + " comes from " + short(w.str(e, "id")) + ", which has an untrusted ancestor through a weak edge only"
	case "tainted-justification":
		e := w.entry(f)
		text = rule + ": justification " + short(w.str(e, "id")) + " " + w.describe(e)
	case "plan-used":
		p := w.object(w.in, "plan")
		text = "plan " + short(w.str(p, "id")) + " step " + w.integer(p, "step") + " is the control justification: the call matches it"
	case "plan-unused":
		p := w.object(w.in, "plan")
		text = "plan " + short(w.str(p, "id")) + " step " + w.integer(p, "step") + " gives no authority: " + w.str(p, "why")
	case "extension":
		text = w.str(f, "reason")
	default:
		return "", fmt.Errorf("no reason is written for rule %s", rule)
	}
	if w.err != nil {
		err := w.err
		w.err = nil
		return "", err
	}
	return text, nil
}

// steered: where each protected argument came from, and the catalog's
// outcome.
func (w *reasonWriter) steered(f ast.Object) string {
	var list []string
	err := each(valueOf(f, "sources"), func(t *ast.Term) error {
		s, ok := t.Value.(ast.Object)
		if !ok {
			return fmt.Errorf("a source is a %s, not an object", ast.ValueName(t.Value))
		}
		e := w.entry(s)
		list = append(list, w.str(s, "arg")+" <- "+short(w.str(e, "id"))+" ("+w.str(e, "principal")+")")
		return nil
	})
	if err != nil {
		w.fail(fmt.Errorf("sources: %w", err))
	}
	slices.Sort(list)
	list = slices.Compact(list)
	return "steered: the justification is tainted, but every protected argument comes from trusted entries (" + strings.Join(list, ", ") +
		"); the catalog's outcome for " + w.str(w.object(w.in, "action"), "tool") + " is " + w.str(f, "outcome")
}

// delegated: the value whole, and where it came from, for the person who
// confirms it.
func (w *reasonWriter) delegated(f ast.Object) string {
	name := w.str(f, "arg")
	a := w.object(w.in, "action")
	e := w.entry(f)
	if w.err != nil {
		return ""
	}
	value := valueOf(w.object(a, "args"), name)
	arg, _ := valueOf(w.object(w.in, "arguments"), name).(ast.Object)
	d, _ := valueOf(arg, "delegation").(ast.Object)
	if value == nil || d == nil {
		w.fail(fmt.Errorf("argument %s is not a delegated argument of the input", name))
		return ""
	}
	from := "entry " + short(w.str(e, "id")) + " (" + w.str(e, "principal") + ")"
	if valueOf(d, "step") != nil {
		from = "the output " + short(w.str(e, "id")) + " (" + w.str(e, "principal") + ") of plan step " + w.integer(d, "step") +
			", " + w.str(d, "tool") + " " + valueOf(d, "args").String()
	}
	then := "so a person confirms it"
	switch o, _ := valueOf(w.object(w.in, "tool"), "on_delegated").(ast.String); o {
	case "allow":
		then = "and the catalog allows delegated calls of this tool unconfirmed"
	case "deny":
		then = "and the catalog denies delegated calls of this tool"
	}
	return "delegated: " + w.str(a, "tool") + " with " + name + " = " + value.String() + ", read from " + from +
		", the source the plan names for it: the value is only as trustworthy as that source, " + then
}

// describe says why an entry is untrusted: its first untrusted root, or its
// effective tier.
func (w *reasonWriter) describe(e ast.Object) string {
	if u, ok := valueOf(e, "untrusted").(*ast.Array); ok && u.Len() > 0 {
		r, ok := u.Elem(0).Value.(ast.Object)
		if !ok {
			w.fail(errors.New("an untrusted root is not an object"))
			return ""
		}
		return "descends from " + w.str(r, "tier") + " principal " + w.str(r, "principal")
	}
	return "has effective tier " + w.str(e, "effective_tier")
}

// fail keeps the first error met while writing one reason.
func (w *reasonWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// str is o's string field key ("" and an error kept when there is none).
func (w *reasonWriter) str(o ast.Object, key string) string {
	if o == nil {
		return "" // the error that made o nil is kept
	}
	switch v := valueOf(o, key).(type) {
	case ast.String:
		return string(v)
	case nil:
		w.fail(fmt.Errorf("no field %s", key))
	default:
		w.fail(fmt.Errorf("field %s is a %s, not a string", key, ast.ValueName(v)))
	}
	return ""
}

func (w *reasonWriter) object(o ast.Object, key string) ast.Object {
	switch v := valueOf(o, key).(type) {
	case ast.Object:
		return v
	case nil:
		w.fail(fmt.Errorf("the input has no %s", key))
	default:
		w.fail(fmt.Errorf("the input's %s is a %s, not an object", key, ast.ValueName(v)))
	}
	return nil
}

func (w *reasonWriter) integer(o ast.Object, key string) string {
	if o == nil {
		return ""
	}
	n, ok := valueOf(o, key).(ast.Number)
	if !ok {
		w.fail(fmt.Errorf("field %s is not a number", key))
		return ""
	}
	i, ok := n.Int()
	if !ok {
		w.fail(fmt.Errorf("field %s is %s, not an integer", key, n))
		return ""
	}
	return strconv.Itoa(i)
}

// entry is the input's entry that finding f names.
func (w *reasonWriter) entry(f ast.Object) ast.Object {
	id := w.str(f, "entry")
	if w.err != nil {
		return nil
	}
	if w.entries == nil {
		w.index()
	}
	e, ok := w.entries[id]
	if !ok {
		w.fail(fmt.Errorf("entry %s is not in the input", short(id)))
	}
	return e
}

// index maps the ID of every entry of the justification and of the
// arguments' sources to the entry.
func (w *reasonWriter) index() {
	w.entries = map[string]ast.Object{}
	add := func(t *ast.Term) error {
		if e, ok := t.Value.(ast.Object); ok {
			if id, ok := valueOf(e, "id").(ast.String); ok {
				w.entries[string(id)] = e
			}
		}
		return nil
	}
	_ = each(valueOf(w.in, "justification"), add)
	if args, ok := valueOf(w.in, "arguments").(ast.Object); ok {
		args.Foreach(func(_, arg *ast.Term) {
			if a, ok := arg.Value.(ast.Object); ok {
				_ = each(valueOf(a, "sources"), add)
			}
		})
	}
}

// approval is the input's approval that finding f names.
func (w *reasonWriter) approval(f ast.Object) ast.Object {
	id := w.str(f, "approval")
	var found ast.Object
	if list, ok := valueOf(w.in, "approvals").(*ast.Array); ok {
		for i := range list.Len() {
			if a, ok := list.Elem(i).Value.(ast.Object); ok && found == nil {
				if v, ok := valueOf(a, "id").(ast.String); ok && string(v) == id {
					found = a
				}
			}
		}
	}
	if found == nil {
		w.fail(fmt.Errorf("approval %s is not in the input", short(id)))
	}
	return found
}

// valueOf is o's field key, nil when o has none.
func valueOf(o ast.Object, key string) ast.Value {
	if o == nil {
		return nil
	}
	if t := o.Get(keyOf(key)); t != nil {
		return t.Value
	}
	return nil
}

func stringField(o ast.Object, key string) (string, error) {
	switch v := valueOf(o, key).(type) {
	case ast.String:
		return string(v), nil
	case nil:
		return "", fmt.Errorf("no field %s", key)
	default:
		return "", fmt.Errorf("field %s is a %s, not a string", key, ast.ValueName(v))
	}
}

// each calls f on each element of an array or a set.
func each(v ast.Value, f func(*ast.Term) error) error {
	switch x := v.(type) {
	case *ast.Array:
		for i := range x.Len() {
			if err := f(x.Elem(i)); err != nil {
				return err
			}
		}
		return nil
	case ast.Set:
		return x.Iter(f)
	case nil:
		return errors.New("missing")
	}
	return fmt.Errorf("a %s, not an array or a set", ast.ValueName(v))
}
