package pedigree

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
)

// Entry is what a harness records: who says what, in which session, derived
// from what.
type Entry struct {
	Principal string
	Kind      lineage.Kind
	Session   string
	Content   []byte
	// Parents, when not nil, are the harness's attribution (an empty slice:
	// no parents). When nil, an entry in a session derives from the
	// session's whole context with strong edges: an agent read all of it,
	// and a tool's output is made from what the agent handed it, so neither
	// starts clean in a tainted session. Only a user principal's entries
	// (what a person typed) and entries outside any session have no parents
	// by default.
	Parents []lineage.Parent
	// StoreContent keeps the content itself beside its digest.
	StoreContent bool
	// Steps are a plan's steps (Kind lineage.KindPlan only). A plan names
	// its parents explicitly: what it was made from.
	Steps []lineage.PlanStep
}

// Reader is what building a statement reads: the session's context (for
// default parents and justifications) and ID resolution. The engine reads
// its store; a client of the sidecar server reads the server.
type Reader interface {
	Context(ctx context.Context, session string) ([]string, error)
	Resolve(ctx context.Context, prefix string) (string, error)
}

// ContextReferrer is a Reader that can name a session's whole context by
// reference: its count and the hash chain over it, read together
// (lineage.ContextRef). BuildCall then makes a call with the default
// justification (the whole context) name it so instead of listing every
// entry: a statement of O(arguments), not O(context). The engine's reader
// is one; a Reader that is not (the sidecar server's client, whose protocol
// does not carry the head) keeps listing, and both forms label, decide and
// verify alike.
type ContextReferrer interface {
	Reader
	ContextRef(ctx context.Context, session string) (*lineage.ContextRef, error)
}

type engineReader struct{ e *Engine }

func (r engineReader) ContextRef(ctx context.Context, session string) (*lineage.ContextRef, error) {
	return r.e.ContextRef(ctx, session)
}

func (r engineReader) Context(ctx context.Context, session string) ([]string, error) {
	return r.e.graph.Context(ctx, session)
}
func (r engineReader) Resolve(ctx context.Context, prefix string) (string, error) {
	return r.e.Resolve(ctx, prefix)
}

// statement builds the statement for an entry, filling in the default
// parents from the session's context.
func (e *Engine) statement(ctx context.Context, en Entry) (*lineage.Statement, error) {
	return BuildEntry(ctx, engineReader{e}, en, e.cfg.clock())
}

// BuildEntry builds the statement for an entry at time now, reading the
// session's context through r when the entry takes its default parents.
func BuildEntry(ctx context.Context, r Reader, en Entry, now time.Time) (*lineage.Statement, error) {
	if en.Kind == "" {
		en.Kind = lineage.KindMemory
	}
	if en.Kind == lineage.KindPlan && en.Parents == nil {
		return nil, fmt.Errorf("%w: a plan names its parents explicitly (what it was made from), never the whole context", lineage.ErrMalformed)
	}
	parents := en.Parents
	if parents == nil && en.Session != "" && !isUser(en.Principal) {
		ids, err := r.Context(ctx, en.Session)
		if err != nil {
			return nil, err
		}
		if len(ids) > lineage.MaxParents {
			return nil, fmt.Errorf("%w: session %s has %d entries in context, more than the %d parents an entry may name: give explicit parents",
				lineage.ErrMalformed, en.Session, len(ids), lineage.MaxParents)
		}
		for _, id := range ids {
			parents = append(parents, lineage.Parent{ID: id, Weight: 1})
		}
	}
	st := &lineage.Statement{
		Version: 1, Principal: en.Principal, Kind: en.Kind, Session: en.Session,
		ContentDigest: lineage.DigestContent(en.Content), Parents: parents, Time: lineage.FormatTime(now),
		Steps: en.Steps,
	}
	return st, st.Validate()
}

// isUser: a user principal's entries take no default parents.
func isUser(principal string) bool { return strings.HasPrefix(principal, "user:") }

// Call is a proposed tool call.
type Call struct {
	Principal string
	Session   string
	Tool      string
	Args      []byte // JSON object; nil for none
	// Justification is what the agent relied on (IDs or prefixes). When
	// nil, it is the session's whole context. An explicit empty list (or an
	// empty ID in it) is refused with lineage.ErrMalformed: it never means
	// "nothing", which would let a call in a tainted session rest on no
	// entry at all.
	Justification []string
	// ArgSources maps an argument to the entries its value came from (IDs
	// or prefixes). An argument it does not name comes from the whole
	// justification. The catalog's per-argument rules say which arguments
	// must come from trusted entries.
	ArgSources map[string][]string
	// Plan, when set, is the plan (ID or prefix) whose step PlanStep the
	// call carries out. When the call matches the step, its justification
	// is the plan and the sources of its data arguments (plus Justification
	// when given); when it does not, the plan and the ordinary
	// justification. See plan.go.
	Plan     string
	PlanStep int
}

// callStatement builds the signed statement of a proposed call.
func (e *Engine) callStatement(ctx context.Context, c Call) (*lineage.Statement, map[string][]string, error) {
	return BuildCall(ctx, engineReader{e}, c, e.cfg.clock())
}

// BuildCall builds the statement of a proposed call at time now: its
// parents are its justification (the session's context when not given),
// and the argument sources are resolved to full IDs. When r is a
// ContextReferrer, the session's context as a default justification is
// named by reference (a version 2 statement) rather than listed; an
// explicit justification, or a plan citation, is always listed.
func BuildCall(ctx context.Context, r Reader, c Call, now time.Time) (*lineage.Statement, map[string][]string, error) {
	args, err := lineage.CanonicalArgs(c.Args)
	if err != nil {
		return nil, nil, err
	}
	srcs, err := resolveSources(ctx, r, c.ArgSources)
	if err != nil {
		return nil, nil, err
	}
	just := c.Justification
	if err := checkJustification(just); err != nil {
		return nil, nil, err
	}
	var ref *lineage.PlanRef
	if c.Plan != "" {
		if ref, just, err = planJustification(ctx, r, c, args, srcs); err != nil {
			return nil, nil, err
		}
	}
	var parents []lineage.Parent
	var cref *lineage.ContextRef
	rr, byRef := r.(ContextReferrer)
	if just == nil && byRef && ref == nil {
		// The session's context, by reference (nil: an empty context).
		if cref, err = rr.ContextRef(ctx, c.Session); err != nil {
			return nil, nil, err
		}
	} else if just == nil {
		// The session's context: distinct full IDs, in order (Validate
		// checks them again).
		ids, err := r.Context(ctx, c.Session)
		if err != nil {
			return nil, nil, err
		}
		parents = make([]lineage.Parent, len(ids))
		for i, id := range ids {
			parents[i] = lineage.Parent{ID: id, Weight: 1}
		}
	}
	seen := map[string]bool{}
	for _, j := range just {
		if lineage.IsID(j) {
			// A full ID needs no look-up: the gate checks that every
			// parent exists, and denies the call when one does not.
			if !seen[j] {
				seen[j] = true
				parents = append(parents, lineage.Parent{ID: j, Weight: 1})
			}
			continue
		}
		// A prefix must resolve: only a full ID (above) may name an entry
		// that is not stored, and then the gate denies the call and logs why.
		id, err := r.Resolve(ctx, j)
		if err != nil {
			return nil, nil, err
		}
		if !seen[id] {
			seen[id] = true
			parents = append(parents, lineage.Parent{ID: id, Weight: 1})
		}
	}
	if parents == nil {
		parents = []lineage.Parent{}
	}
	st := &lineage.Statement{
		Version: 1, Principal: c.Principal, Kind: lineage.KindCall, Session: c.Session,
		ContentDigest: lineage.DigestContent(args), Parents: parents, Context: cref, Tool: c.Tool, Args: args,
		Plan: ref, Time: lineage.FormatTime(now),
	}
	if cref != nil {
		st.Version = 2
	}
	return st, srcs, st.Validate()
}

// resolveSources resolves every argument's sources to full IDs.
func resolveSources(ctx context.Context, r Reader, in map[string][]string) (map[string][]string, error) {
	srcs := map[string][]string{}
	for name, ids := range in {
		// An explicit empty list stays explicit: the agent says it composed
		// the value itself, which the policy judges apart from "no
		// provenance given".
		srcs[name] = []string{}
		for _, p := range ids {
			id, err := r.Resolve(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("argument %s: %w", name, err)
			}
			srcs[name] = append(srcs[name], id)
		}
	}
	return srcs, nil
}

// BuildApproval builds an approval of decision d by approver, usable until
// now+ttl.
func BuildApproval(d *gate.Decision, approver string, ttl time.Duration, now time.Time) *lineage.Statement {
	return &lineage.Statement{
		Version: 1, Principal: approver, Kind: lineage.KindApproval, Session: d.Session,
		ContentDigest: lineage.DigestContent([]byte(d.ID)), Parents: []lineage.Parent{}, Time: lineage.FormatTime(now),
		Approval: &lineage.Grant{Decision: d.ID, Action: d.ArgsDigest, Expires: lineage.FormatTime(now.Add(ttl))},
	}
}

// planJustification is the justification of a call that cites a plan step:
// the plan and the sources of its data arguments when the call matches the
// step (plus c.Justification when given), else the plan and the ordinary
// justification (c.Justification, or nil for the session's context). The
// gate decides again, on the stored plan; this only makes the call entry's
// parents say what it derives from.
func planJustification(ctx context.Context, r Reader, c Call, args []byte, srcs map[string][]string) (*lineage.PlanRef, []string, error) {
	pr, ok := r.(PlanReader)
	if !ok {
		return nil, nil, fmt.Errorf("%w: this reader cannot read plans", lineage.ErrPlan)
	}
	id, err := r.Resolve(ctx, c.Plan)
	if err != nil {
		return nil, nil, fmt.Errorf("plan %s: %w", c.Plan, err)
	}
	st, err := pr.Plan(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("plan %s: %w", c.Plan, err)
	}
	step, err := lineage.PlanStepOf(st, id, c.Session, c.PlanStep)
	if err != nil {
		return nil, nil, err
	}
	m, err := lineage.MatchStep(step, c.Tool, args)
	if err != nil {
		return nil, nil, err
	}
	ref := &lineage.PlanRef{ID: id, Step: c.PlanStep}
	just := []string{id}
	if !m.OK {
		if c.Justification == nil {
			ctxIDs, err := r.Context(ctx, c.Session)
			if err != nil {
				return nil, nil, err
			}
			return ref, append(just, ctxIDs...), nil
		}
		return ref, append(just, c.Justification...), nil
	}
	for _, name := range m.Data {
		just = append(just, srcs[name]...)
	}
	return ref, append(just, c.Justification...), nil
}

// PlanReader is a Reader that can also read a stored plan. Both the engine
// and the server's client are; BuildCall needs one for a call that cites a
// plan.
type PlanReader interface {
	Reader
	// Plan is a stored plan entry's statement, by full ID.
	Plan(ctx context.Context, id string) (*lineage.Statement, error)
}

func (r engineReader) Plan(_ context.Context, id string) (*lineage.Statement, error) {
	env, _, err := r.e.graph.Envelope(id)
	if err != nil {
		return nil, err
	}
	st, _, _, err := lineage.Open(env)
	return st, err
}
