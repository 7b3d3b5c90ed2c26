package pedigree

import (
	"context"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
)

// PreviewWith is Preview decided by g instead of the engine's gate, on the
// facts the engine reads, with the policy input as it would be logged: the
// differential tests compare two gates on them.
func (e *Engine) PreviewWith(ctx context.Context, g *gate.Gate, c Call) (*gate.Decision, []byte, error) {
	st, srcs, err := e.callStatement(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if st, err = e.graph.Expand(st); err != nil {
		return nil, nil, err
	}
	call, err := e.graph.Preview(st)
	if err != nil {
		return nil, nil, err
	}
	now := e.cfg.clock()
	d := g.NewDecision(st, call.ID, now)
	f, err := e.facts(st, call, srcs, now, g.Lean())
	var input []byte
	if err == nil {
		var ev *gate.Evaluation
		ev, err = g.Decide(ctx, f, d, now)
		if eerr := ev.Encode(); err == nil {
			err = eerr
		}
		input = ev.Input
	}
	if err != nil {
		gate.FailClosed(d, err.Error())
	}
	return d, input, nil
}

// Nodes are the graph's nodes of ids.
func (e *Engine) Nodes(ids []string) ([]*lineage.Node, error) { return e.graph.Nodes(ids) }

// listingReader reads what engineReader reads, without naming a context by
// reference: BuildCall lists the context, as a sidecar client does.
type listingReader struct{ e *Engine }

func (r listingReader) Context(ctx context.Context, session string) ([]string, error) {
	return r.e.graph.Context(ctx, session)
}
func (r listingReader) Resolve(ctx context.Context, prefix string) (string, error) {
	return r.e.Resolve(ctx, prefix)
}

// CallStatementListed is CallStatement with the session's context listed
// rather than named by reference.
func (e *Engine) CallStatementListed(ctx context.Context, c Call) (*lineage.Statement, map[string][]string, error) {
	return BuildCall(ctx, listingReader{e}, c, e.cfg.clock())
}

// PreviewStatement is Preview of a built call statement (either form),
// decided by g (nil: the engine's gate).
func (e *Engine) PreviewStatement(ctx context.Context, g *gate.Gate, st *lineage.Statement, srcs map[string][]string) (*gate.Decision, error) {
	if g == nil {
		g = e.gate
	}
	st, err := e.graph.Expand(st)
	if err != nil {
		return nil, err
	}
	call, err := e.graph.Preview(st)
	if err != nil {
		return nil, err
	}
	now := e.cfg.clock()
	d := g.NewDecision(st, call.ID, now)
	f, err := e.facts(st, call, srcs, now, g.Lean())
	if err == nil {
		_, err = g.Decide(ctx, f, d, now)
	}
	if err != nil {
		gate.FailClosed(d, err.Error())
	}
	return d, nil
}
