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
	st, srcs, err := e.CallStatement(ctx, c)
	if err != nil {
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
