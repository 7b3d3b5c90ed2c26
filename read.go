package pedigree

import (
	"context"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Resolve turns an ID or a unique prefix into a full entry ID.
func (e *Engine) Resolve(ctx context.Context, prefix string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	id, err := e.graph.Resolve(prefix)
	if errors.Is(err, lineage.ErrUnknownEntry) {
		// Written elsewhere in the fleet, perhaps: wait (bounded) for
		// this node to apply what the stream holds, then look again.
		waited, werr := e.committer.catchUp(ctx)
		if werr != nil {
			return "", fmt.Errorf("%w (this fleet node has not applied it: %v)", err, werr)
		}
		if waited {
			id, err = e.graph.Resolve(prefix)
		}
	}
	return id, err
}

// Registry is the principal registry.
func (e *Engine) Registry(ctx context.Context) (*RegistryView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	digest, err := e.reg.FreezeDigest()
	if err != nil {
		return nil, err
	}
	return &RegistryView{Frozen: e.reg.Frozen(), Tau: e.reg.Tau(), Principals: e.reg.List(), FreezeDigest: digest, OperatorKey: e.reg.OperatorKey(),
		MaxApprovalTTL: e.reg.MaxApprovalTTL(), TrustRoot: e.TrustRoot()}, nil
}

// ByContent returns the memory entries whose signed content digest is
// digest ("sha256:<hex>"): how the MCP gateway matches a memory server's
// answer back to the entries that wrote it.
func (e *Engine) ByContent(ctx context.Context, digest string) ([]string, error) {
	return e.graph.ByContent(ctx, digest)
}

// Context is a session's context: every entry recorded in it or recalled
// into it, in order.
func (e *Engine) Context(ctx context.Context, session string) ([]string, error) {
	return e.graph.Context(ctx, session)
}

// Decision is a logged decision, by ID or unique prefix.
func (e *Engine) Decision(ctx context.Context, id string) (*gate.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := e.decisions.Record(id)
	if err != nil {
		return nil, err
	}
	e.expand(&r.Decision)
	return &r.Decision, nil
}

// expand gives a logged decision that names its call's context by
// reference its whole justification (gate.Decision.Whole) when the context
// reads intact (one envelope and one range read of its context rows);
// otherwise Whole says it is not known, and verify says why.
func (e *Engine) expand(d *gate.Decision) {
	if d.Context == nil {
		return
	}
	_ = e.db.View(func(t *store.Txn) error {
		_, err := e.wholeJustification(t.In(store.Lineage), d)
		return err
	})
}

// Decisions lists logged decisions, oldest first.
func (e *Engine) Decisions(ctx context.Context, q DecisionQuery) ([]gate.Decision, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("%w: a negative decision limit", lineage.ErrMalformed)
	}
	// Not expanded (gate.Decision.Whole): a listing of a long log would
	// read every decision's call and context; Decision reads one whole.
	return e.decisions.Decisions(ctx, q.Limit, q.Session)
}

// Show is one entry as stored, with its signature checked again.
func (e *Engine) Show(ctx context.Context, prefix string) (*EntryView, error) {
	id, err := e.Resolve(ctx, prefix)
	if err != nil {
		return nil, err
	}
	n, err := e.graph.Node(id)
	if err != nil {
		return nil, err
	}
	env, content, err := e.graph.Envelope(id)
	if err != nil {
		return nil, err
	}
	// Every parent edge: a context reference's entries too, read from the
	// context rows and checked against the reference.
	edges, err := e.graph.Edges(n)
	if err != nil {
		return nil, err
	}
	v := &EntryView{Node: n, Parents: edges, Envelope: env, Content: content}
	if err := e.graph.VerifyEntrySignature(env); err != nil {
		v.SignatureError = err.Error()
	}
	return v, nil
}

// Trace returns the bounded ancestry of an entry.
func (e *Engine) Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error) {
	full, err := e.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.graph.Trace(ctx, full, o)
}

// Trajectory is a session's trajectory, with its calls and alerts.
func (e *Engine) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	return e.decisions.Trajectory(ctx, session)
}

// ContextRef names a session's whole context by reference: its count and
// the hash chain over it (nil for an empty context). With it the engine is
// a ContextReferrer: a call it builds with the default justification names
// its context so, in O(arguments), and never needs the session's context
// rolled up to stay within lineage.MaxParents.
func (e *Engine) ContextRef(ctx context.Context, session string) (*lineage.ContextRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.graph.ContextRef(session)
}
