package pedigree

import (
	"context"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
)

// The one commit every write is: a verb builds a record (record.go), commit
// makes it durable through the engine's committer (the store's group commit
// on a local engine, the fleet's stream on a node), and apply writes it
// through the owners inside the transaction.

// apply writes r through the owners inside t: what is stored and its leaf
// in the Merkle log, always together. It does nothing but write to t (the
// committer may run it more than once).
func (e *Engine) apply(t *store.Txn, r *record) error {
	r.existing = nil
	switch r.kind {
	case recEntry:
		var err error
		r.existing, err = e.writeEntry(t, r.entry)
		return err
	case recApproval:
		st, dt := r.entry.Statement, t.In(store.Decisions)
		if err := e.decisions.MarkApproved(dt, st.Approval.Decision, r.entry.Node.ID); err != nil {
			return err
		}
		existing, err := e.writeEntry(t, r.entry)
		if err != nil || existing != nil {
			r.existing = existing
			return err
		}
		if err := e.reviewApproval(dt, st, r.entry.Node.ID); err != nil {
			return err
		}
		return e.decisions.AddApproval(dt, st.Session, st.Approval.Action, r.entry.Node.ID, st.Approval.Expires)
	case recRejection:
		st, dt := r.entry.Statement, t.In(store.Decisions)
		if prev, err := e.decisions.ReviewIn(dt, st.Rejection.Decision); err != nil || prev != nil {
			if err == nil {
				err = gate.ReviewConflict(prev)
			}
			return err
		}
		existing, err := e.writeEntry(t, r.entry)
		if err != nil || existing != nil {
			r.existing = existing
			return err
		}
		return e.decisions.AddReview(dt, gate.Review{DecisionID: st.Rejection.Decision, Outcome: gate.Rejected, Entry: r.entry.Node.ID, By: st.Principal, Time: st.Time})
	case recDecision:
		// A copy of a logged decision's record (on a fleet's stream,
		// beyond its de-duplication window) is not logged twice.
		if ok, err := e.decisions.Logged(t.In(store.Decisions), r.decision.ID); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("%w: %s", decisionlog.ErrLogged, r.decision.ID)
			}
			return err
		}
		if r.entry != nil {
			if _, err := e.writeEntry(t, r.entry); err != nil {
				return err
			}
		}
		idx, err := e.appendLeaf(t, tlog.LeafDecision, r.decision.ID)
		if err != nil {
			return err
		}
		return e.decisions.Append(t.In(store.Decisions), r.decision, r.body, r.input, idx+1, r.step)
	case recRecall:
		lt := t.In(store.Lineage)
		if ok, err := e.graph.RecallStored(lt, r.recall); err != nil || ok {
			return err // the same recall, at the same instant: stored once
		}
		if _, err := e.appendLeaf(t, tlog.LeafRecall, r.recall.RecallID()); err != nil {
			return err
		}
		if err := e.graph.RecordRecall(lt, r.recall); err != nil {
			return err
		}
		return e.decisions.ObserveRecall(t.In(store.Decisions), r.recall.Session)
	}
	return errUnknownRecord
}

// commit makes r durable: through the store's committer on a local engine,
// through the fleet's stream on a fleet node (which returns once this
// node's applier has applied it: a node reads its own writes).
func (e *Engine) commit(ctx context.Context, r *record) error { return e.committer.commit(ctx, r) }

// localCommitter commits to the engine's own store.
type localCommitter struct{ e *Engine }

func (c localCommitter) commit(ctx context.Context, r *record) error {
	if err := c.e.db.Commit(ctx, r.size(), func(t *store.Txn) error { return c.e.apply(t, r) }); err != nil {
		return err
	}
	r.committed()
	return c.e.afterCommit(r)
}

func (localCommitter) catchUp(context.Context) (bool, error) { return false, nil }

func (localCommitter) close() {}

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

// reviewApproval is approve's part of the reviews, inside its commit: a
// rejected decision cannot be approved; the first approval is its review.
func (e *Engine) reviewApproval(dt kv.Txn, st *lineage.Statement, approvalID string) error {
	return e.decisions.AddReview(dt, gate.Review{DecisionID: st.Approval.Decision, Outcome: gate.Approved, Entry: approvalID, By: st.Principal, Time: st.Time})
}

// prepare runs a graph's Prepare; on a fleet node, an entry that names a
// parent this node has not applied waits (bounded) for the node to apply
// what the stream holds, then tries once more. What is still unknown is
// refused as unknown, saying that this node waited.
func (e *Engine) prepare(ctx context.Context, fn func() (*lineage.Pending, error)) (*lineage.Pending, error) {
	p, err := fn()
	if !errors.Is(err, lineage.ErrUnknownParent) {
		return p, err
	}
	waited, werr := e.committer.catchUp(ctx)
	if werr != nil {
		return nil, fmt.Errorf("%w (this fleet node has not applied it: %v)", err, werr)
	}
	if !waited {
		return p, err
	}
	p, err = fn()
	if errors.Is(err, lineage.ErrUnknownParent) {
		s, _ := e.fleetStatus()
		return nil, fmt.Errorf("%w (not in the fleet's stream: this node has applied all %d records)", err, s.Applied)
	}
	return p, err
}
