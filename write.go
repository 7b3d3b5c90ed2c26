package pedigree

import (
	"context"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
)

// The engine's writes, each one record (record.go) applied in one commit:
// what is stored, and its leaf in the Merkle log, always together.

// insert stores a prepared entry and logs it, in one commit. An entry that
// is already stored is returned as it is.
func (e *Engine) insert(ctx context.Context, p *lineage.Pending) (*lineage.Node, error) {
	r := &record{kind: recEntry, entry: p}
	if err := e.commit(ctx, r); err != nil {
		return nil, err
	}
	if r.existing != nil {
		return r.existing, nil
	}
	return p.Node, nil
}

// writeEntry writes a prepared entry and its log leaf inside t, unless it
// is stored already (then it returns the stored node).
func (e *Engine) writeEntry(t *store.Txn, p *lineage.Pending) (*lineage.Node, error) {
	lt := t.In(store.Lineage)
	if n, err := p.Stored(lt); err != nil || n != nil {
		return n, err
	}
	idx, err := e.appendLeaf(t, tlog.LeafEntry, p.Node.ID)
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
	return e.commit(ctx, &record{kind: recRecall, recall: r})
}
