package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/pedigree-ai/pedigree/trajectory"
)

var (
	// ErrPolicy: the policy does not load, compile or yield a well-formed decision.
	ErrPolicy = errors.New("policy error")
	// ErrCatalog: the tool catalog is malformed.
	ErrCatalog = errors.New("tool catalog error")
	// ErrUnknownDecision: no decision with that ID is logged.
	ErrUnknownDecision = errors.New("unknown decision")
	// ErrApproval: an approval that cannot be recorded.
	ErrApproval = errors.New("approval refused")
)

// Outcome is what a decision says: allow, deny, or ask a human.
type Outcome string

// The outcomes of a check.
const (
	Allow Outcome = "allow"
	Deny  Outcome = "deny"
	Ask   Outcome = "ask"
)

// Gate decides on proposed tool calls: a pure evaluator of the policy over
// facts the engine read from lineage and the decision log. It stores
// nothing. It is safe for concurrent use: the prepared query is shared, and
// each decision builds its own input.
type Gate struct {
	catalog *Catalog
	query   rego.PreparedEvalQuery
	version string
	timeout time.Duration
	model   *trajectory.Model
	// lean: the policy's input lists only the justification entries with
	// an untrusted label (Policy.lean).
	lean bool
	// memo keeps the policy's values by what it reads of the input (nil:
	// not memoised; see memo.go).
	memo *memo
}

type config struct {
	policy  *Policy
	catalog *Catalog
	timeout time.Duration
	model   *trajectory.Model
}

// Option configures a Gate.
type Option func(*config)

// WithPolicy replaces the default policy (see PolicyFromDir).
func WithPolicy(p *Policy) Option { return func(c *config) { c.policy = p } }

// WithCatalog sets the tool catalog. Without one, every tool is sensitive.
func WithCatalog(cat *Catalog) Option { return func(c *config) { c.catalog = cat } }

// WithTimeout bounds one policy evaluation; past it the check denies.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithModel adds a trained trajectory model to the invariant rules.
func WithModel(m *trajectory.Model) Option { return func(c *config) { c.model = m } }

// DefaultTimeout bounds a policy evaluation unless WithTimeout says otherwise.
const DefaultTimeout = 500 * time.Millisecond

// New compiles the policy once and checks that it yields a well-formed
// decision. A policy that does not compile, or whose decision has the wrong
// shape, stops the gate from starting.
func New(ctx context.Context, opts ...Option) (*Gate, error) {
	c := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&c)
	}
	if c.catalog == nil {
		c.catalog = &Catalog{Tools: map[string]Tool{}}
	}
	if c.timeout <= 0 {
		return nil, errors.New("gate: the evaluation timeout must be positive")
	}
	if c.policy == nil {
		p, err := DefaultPolicy()
		if err != nil {
			return nil, err
		}
		c.policy = p
	}
	q, err := prepare(ctx, c.policy)
	if err != nil {
		return nil, err
	}
	g := &Gate{catalog: c.catalog, query: q, timeout: c.timeout, model: c.model, version: c.policy.version(c.catalog), lean: c.policy.lean, memo: newMemo(c.policy)}
	if err := g.probe(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// prepare compiles the policy once into a query that is shared by every
// check.
func prepare(ctx context.Context, p *Policy) (rego.PreparedEvalQuery, error) {
	docs := p.Documents
	if docs == nil {
		docs = map[string]any{}
	}
	ropts := []func(*rego.Rego){
		rego.Query(decisionQuery),
		rego.Store(inmem.NewFromObject(docs)),
		rego.Capabilities(capabilities()),
		// Without strict builtin errors, a builtin that fails makes its
		// expression undefined, and `allow if not tainted` allows.
		rego.StrictBuiltinErrors(true),
		rego.SetRegoVersion(ast.RegoV1),
		rego.GenerateJSON(asValue),
	}
	for _, m := range p.Modules {
		ropts = append(ropts, rego.ParsedModule(m))
	}
	q, err := rego.New(ropts...).PrepareForEval(ctx)
	if err != nil {
		return q, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	return q, nil
}

// probe evaluates the policy on a synthetic sensitive call and checks the
// shape of what it yields.
func (g *Gate) probe(ctx context.Context) error {
	in := obj(
		"action", obj("tool", str("pedigree.probe"), "args", ast.ObjectTerm(), "principal", str("agent:probe"), "session", str("probe")),
		"tool", toolTerm(Tool{Irreversible: true, Role: trajectory.Other}, false),
		"justification", ast.ArrayTerm(),
		"arguments", ast.ObjectTerm(),
		"trajectory", obj("features", featuresTerm(&trajectory.State{}), "alerts", ast.ArrayTerm()),
		"approvals", ast.ArrayTerm(),
	)
	if _, err := g.eval(ctx, in.Value, probeTime); err != nil {
		return fmt.Errorf("%w: the policy does not yield a well-formed decision: %v", ErrPolicy, err)
	}
	return nil
}

// probeTime is the clock the probe's evaluation sees: any fixed instant.
var probeTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Model is the trajectory model the gate scores sessions with (nil: the
// invariant rules only).
func (g *Gate) Model() *trajectory.Model { return g.model }

// PolicyVersion digests the loaded policies, their data and the catalog.
func (g *Gate) PolicyVersion() string { return g.version }

// Lean reports whether the policy's input lists only the justification
// entries with an untrusted label (the default policy's; see Policy.lean):
// the engine then reads only those, when a summary says which they are
// (Facts.Summarised).
func (g *Gate) Lean() bool { return g.lean }

// Catalog is the tool catalog in use.
func (g *Gate) Catalog() *Catalog { return g.catalog }

// verdict is the policy's decision object, checked for shape, with its
// findings written as reasons.
type verdict struct {
	Decision Outcome
	Reasons  []string
	Warnings []string
	Approval string
}

// eval runs the prepared query. Every way it can fail is an error, and the
// caller turns every error into a deny.
//
// A value the memo holds for what the policy reads of v is used instead of
// evaluating again (memo.go); evalMemo without useMemo skips it.
func (g *Gate) eval(ctx context.Context, v ast.Value, now time.Time) (*verdict, error) {
	return g.evalMemo(ctx, v, now, true)
}

func (g *Gate) evalMemo(ctx context.Context, v ast.Value, now time.Time, useMemo bool) (*verdict, error) {
	var key ast.Value
	memoised := false
	if useMemo && g.memo != nil {
		key, memoised = g.memo.key(v)
	}
	var val ast.Value
	if memoised {
		val = g.memo.get(key)
	}
	if val == nil {
		var err error
		if val, err = g.evalQuery(ctx, v, now); err != nil {
			return nil, err
		}
	}
	out, err := g.verdictOf(val, v)
	if err == nil && memoised {
		g.memo.put(key, val)
	}
	return out, err
}

// evalQuery runs the prepared query on v.
func (g *Gate) evalQuery(ctx context.Context, v ast.Value, now time.Time) (ast.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	rs, err := g.query.Eval(ctx, rego.EvalParsedInput(v), rego.EvalTime(now))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("policy evaluation timed out after %s", g.timeout)
		}
		return nil, fmt.Errorf("policy evaluation failed: %w", err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, errors.New("the policy's decision is undefined")
	}
	if len(rs) > 1 {
		return nil, errors.New("the policy yields more than one decision")
	}
	val, _ := rs[0].Expressions[0].Value.(ast.Value)
	return val, nil
}

// verdictOf reads the policy's value val on input v.
func (g *Gate) verdictOf(val, v ast.Value) (*verdict, error) {
	out, err := parseVerdict(val, v)
	if err != nil {
		return nil, err
	}
	switch out.Decision {
	case Allow, Deny, Ask:
	default:
		return nil, fmt.Errorf("the policy's decision is %q, not allow, deny or ask", out.Decision)
	}
	return out, nil
}

// asValue keeps the query's result as OPA's value: the verdict is read
// from it directly, without converting it to Go maps first.
func asValue(t *ast.Term, _ *rego.EvalContext) (any, error) { return t.Value, nil }

// parseVerdict reads the decision object the policy yields on input in.
// Its reasons are the policy's own strings ("reasons", in order), then its
// findings written as reasons (see writeReasons); it must have one of the
// two. Any other field, or a field of another type, is an error.
func parseVerdict(v, in ast.Value) (*verdict, error) {
	m, ok := v.(ast.Object)
	if !ok {
		return nil, errors.New("the policy's decision is not an object")
	}
	out := &verdict{}
	var findings []*ast.Term
	hasReasons, hasFindings := false, false
	err := m.Iter(func(kt, val *ast.Term) error {
		k, ok := kt.Value.(ast.String)
		if !ok {
			return fmt.Errorf("the policy's decision has a key %v that is not a string", kt)
		}
		var err error
		switch k {
		case "decision":
			var o string
			o, err = verdictString(string(k), val.Value)
			out.Decision = Outcome(o)
		case "approval":
			out.Approval, err = verdictString(string(k), val.Value)
		case "reasons":
			out.Reasons, err = verdictStrings(string(k), val.Value)
			hasReasons = out.Reasons != nil
		case "findings":
			findings, err = verdictFindings(val.Value)
			hasFindings = findings != nil
		case "warnings":
			out.Warnings, err = verdictStrings(string(k), val.Value)
		default:
			return fmt.Errorf("the policy's decision has an unknown field %q", string(k))
		}
		if err != nil {
			return fmt.Errorf("the policy's decision is malformed: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !hasReasons && !hasFindings {
		return nil, errors.New("the policy's decision has no reasons or findings array")
	}
	if hasFindings {
		r, err := writeReasons(in, findings)
		if err != nil {
			return nil, fmt.Errorf("the policy's findings: %w", err)
		}
		out.Reasons = append(slices.Clip(out.Reasons), r...)
		if out.Reasons == nil {
			out.Reasons = []string{}
		}
	}
	return out, nil
}

func verdictString(field string, v ast.Value) (string, error) {
	switch s := v.(type) {
	case ast.Null:
		return "", nil
	case ast.String:
		return string(s), nil
	}
	return "", fmt.Errorf("%s is a %s, not a string", field, ast.ValueName(v))
}

// verdictStrings reads an array of strings; null is nil, as in JSON.
func verdictStrings(field string, v ast.Value) ([]string, error) {
	if _, ok := v.(ast.Null); ok {
		return nil, nil
	}
	list, ok := v.(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("%s is a %s, not an array", field, ast.ValueName(v))
	}
	out := make([]string, list.Len())
	for i := range list.Len() {
		s, ok := list.Elem(i).Value.(ast.String)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is a %s, not a string", field, i, ast.ValueName(list.Elem(i).Value))
		}
		out[i] = string(s)
	}
	return out, nil
}

// verdictFindings reads a set or an array of findings; null is nil.
func verdictFindings(v ast.Value) ([]*ast.Term, error) {
	switch x := v.(type) {
	case ast.Null:
		return nil, nil
	case ast.Set:
		return append(make([]*ast.Term, 0, x.Len()), x.Slice()...), nil
	case *ast.Array:
		out := make([]*ast.Term, x.Len())
		for i := range out {
			out[i] = x.Elem(i)
		}
		return out, nil
	}
	return nil, fmt.Errorf("findings is a %s, not a set or an array", ast.ValueName(v))
}
