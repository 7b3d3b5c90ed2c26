package pedigree

// The engine's writes, each one record (record.go) applied in one commit:
// what is stored, and its leaf in the Merkle log, always together.

import (
	"context"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Record signs an entry with signer and stores it.
func (e *Engine) Record(ctx context.Context, signer *registry.Signer, en Entry) (*lineage.Node, error) {
	st, err := e.statement(ctx, en)
	if err != nil {
		return nil, err
	}
	signed, err := lineage.SignStatement(signer, st)
	if err != nil {
		return nil, err
	}
	var content []byte
	if en.StoreContent {
		content = en.Content
		if content == nil {
			content = []byte{}
		}
	}
	n, err := e.insertSigned(ctx, signed, content)
	if err != nil {
		return nil, e.refused(ctx, err, en.Principal, signed.Envelope())
	}
	return n, nil
}

// Insert stores an entry signed elsewhere (the server path: clients sign,
// the engine verifies).
func (e *Engine) Insert(ctx context.Context, env, content []byte) (*lineage.Node, error) {
	p, err := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.Prepare(ctx, env, content) })
	if err != nil {
		return nil, e.refused(ctx, err, claimed(env), env)
	}
	return e.insert(ctx, p)
}

// Recall puts stored entries into a session's context, logs the recall,
// and appends it to the session's trajectory.
func (e *Engine) Recall(ctx context.Context, session string, ids []string) error {
	full := make([]string, 0, len(ids))
	for _, p := range ids {
		id, err := e.Resolve(ctx, p)
		if err != nil {
			return err
		}
		full = append(full, id)
	}
	return e.recall(ctx, &lineage.Recall{Session: session, IDs: full, Time: lineage.FormatTime(e.cfg.clock())})
}

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

// recall logs a recall record and puts its entries into the session's
// context, and appends the recall to the session's trajectory, in one
// commit.
func (e *Engine) recall(ctx context.Context, r *lineage.Recall) error {
	if err := r.Validate(); err != nil {
		return err
	}
	return e.commit(ctx, &record{kind: recRecall, recall: r})
}

// insertSigned stores an entry this process signed with
// lineage.SignStatement: instead of decoding the envelope again and
// verifying the signature just made, the graph checks that the signing key
// is the one the frozen registry holds for the principal.
func (e *Engine) insertSigned(ctx context.Context, signed *lineage.Signed, content []byte) (*lineage.Node, error) {
	p, err := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.PrepareSigned(ctx, signed, content) })
	if err != nil {
		return nil, err
	}
	return e.insert(ctx, p)
}
