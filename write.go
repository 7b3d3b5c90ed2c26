package pedigree

import (
	"context"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Every write of the engine is one durable commit that the engine
// assembles here from the owners' parts: what is stored, and its leaf in the
// Merkle log, always together.

// insert stores a prepared entry and logs it, in one commit. An entry that
// is already stored is returned as it is.
func (e *Engine) insert(ctx context.Context, p *lineage.Pending) (*lineage.Node, error) {
	var existing *lineage.Node
	err := e.db.Commit(ctx, p.Size()+256, func(t *store.Txn) error {
		var err error
		existing, err = e.writeEntry(t, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return existing, nil
	}
	p.Committed()
	return p.Node, nil
}

// writeEntry writes a prepared entry and its log leaf inside t, unless it
// is stored already (then it returns the stored node).
func (e *Engine) writeEntry(t *store.Txn, p *lineage.Pending) (*lineage.Node, error) {
	lt := t.In(store.Lineage)
	if n, err := p.Stored(lt); err != nil || n != nil {
		return n, err
	}
	idx, err := tlog.Append(t.In(store.Log), tlog.LeafEntry, p.Node.ID)
	if err != nil {
		return nil, err
	}
	return nil, p.Write(lt, idx+1)
}

// recall logs a recall record and puts its entries into the session's
// context, and appends the recall to the session's trajectory, in one
// commit.
func (e *Engine) recall(ctx context.Context, r *lineage.Recall) error {
	if err := r.Validate(); err != nil {
		return err
	}
	return e.db.Commit(ctx, 128+80*len(r.IDs), func(t *store.Txn) error {
		lt := t.In(store.Lineage)
		if ok, err := e.graph.RecallStored(lt, r); err != nil || ok {
			return err // the same recall, at the same instant: stored once
		}
		idx, err := tlog.Append(t.In(store.Log), tlog.LeafRecall, r.RecallID())
		if err != nil {
			return err
		}
		if err := e.graph.RecordRecall(lt, r, idx+1); err != nil {
			return err
		}
		_, err = e.decisions.Observe(t.In(store.Decisions), r.Session, trajectory.Call{Tool: "memory_recall", Role: trajectory.Recall})
		return err
	})
}
