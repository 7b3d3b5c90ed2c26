package pedigree

import (
	"context"
	"fmt"

	"github.com/pedigree-ai/pedigree/internal/decisionlog"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Every write of the engine is a record: a value that carries exactly what
// is applied, and one deterministic function, apply, that writes it through
// the owners inside one transaction. A local engine commits apply(record)
// through the store's committer; a fleet engine publishes the record to the
// fleet's replicated stream, and every node's applier decodes it (verifying
// every envelope again: see wire.go), then commits apply(record) in stream
// order. The same records in the same order give every node the same
// graph, decision log and Merkle log.

type recordKind uint8

const (
	recEntry     recordKind = iota + 1 // an entry (its envelope and optional content)
	recDecision                        // a sealed decision (with its trajectory step), its input, and the call entry stored with it
	recRecall                          // a recall record
	recApproval                        // an approval entry, indexed for the checks of its session and action
	recRejection                       // a rejection entry: the review of the decision it names
)

func (k recordKind) String() string {
	switch k {
	case recEntry:
		return "entry"
	case recDecision:
		return "decision"
	case recRecall:
		return "recall"
	case recApproval:
		return "approval"
	case recRejection:
		return "rejection"
	}
	return "unknown"
}

// record is one write. entry is a verified, prepared entry (recEntry,
// recApproval, and a decision's call entry, nil when the call was refused).
type record struct {
	kind recordKind

	entry *lineage.Pending

	decision *gate.Decision // sealed: its ID is the hash of body
	body     []byte
	input    []byte
	step     *trajectory.Call // sealed in body

	recall *lineage.Recall

	// existing is set by apply when the entry was stored already.
	existing *lineage.Node
}

// size is a rough count of the bytes apply writes, for the committer.
func (r *record) size() int {
	n := 256
	if r.entry != nil {
		n += r.entry.Size()
	}
	switch r.kind {
	case recDecision:
		n += len(r.body) + len(r.input) + 1024
	case recRecall:
		n += 80 * len(r.recall.IDs)
	case recApproval, recRejection:
		n += 512
	}
	return n
}

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

// committed tells the owners that the transaction holding apply(r)
// committed (the graph caches a new node: the next check reads it).
func (r *record) committed() {
	if r.entry != nil && r.existing == nil {
		r.entry.Committed()
	}
}

// commit makes r durable: through the store's committer on a local engine,
// through the fleet's stream on a fleet node (which returns once this
// node's applier has applied it: a node reads its own writes).
func (e *Engine) commit(ctx context.Context, r *record) error { return e.committer.commit(ctx, r) }

// committer is where a record becomes durable, the one seam between a local
// engine and a fleet node: the store's group commit (localCommitter), or the
// fleet's stream (fleetLink, fleet.go). The verbs never ask which they have.
type committer interface {
	// commit makes r durable, and applied here before it returns.
	commit(ctx context.Context, r *record) error
	// catchUp waits, bounded, until this engine has applied what was
	// committed elsewhere before it was called. false: nothing can have
	// been (a local engine).
	catchUp(ctx context.Context) (bool, error)
	// close stops committing (a fleet node leaves the stream).
	close()
}

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
