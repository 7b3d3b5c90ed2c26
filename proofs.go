package pedigree

import (
	"context"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// Log is the view of an engine's tamper-evident log: its head, checkpoints
// signed here or kept elsewhere, inclusion and consistency proofs, and the
// witnesses it hands checkpoints to.
type Log struct{ e *Engine }

// Log is the engine's log.
func (e *Engine) Log() *Log { return &Log{e} }

// Head is the log's current size and root (hex).
func (l *Log) Head(ctx context.Context) (uint64, string, error) { return l.e.logHead(ctx) }

// Checkpoint signs the log's current size and root with the operator key
// and stores it.
func (l *Log) Checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error) {
	return l.e.checkpoint(ctx, operator)
}

// AddCheckpoint stores a checkpoint signed elsewhere, after checking the
// operator's signature and that the log extends it.
func (l *Log) AddCheckpoint(ctx context.Context, cp *tlog.Checkpoint) error {
	return l.e.addCheckpoint(ctx, cp)
}

// Prove is an inclusion proof of an entry (by ID or prefix), else of a
// decision, in the log at size (0: the head), verified.
func (l *Log) Prove(ctx context.Context, idOrPrefix string, size uint64) (*tlog.InclusionProof, error) {
	return l.e.prove(ctx, idOrPrefix, size)
}

// Consistency is a consistency proof between two checkpoints, verified.
func (l *Log) Consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error) {
	return l.e.consistency(ctx, oldSize, newSize)
}

// ProveAgainst proves an entry (by ID or prefix) or else a decision against
// a checkpoint kept elsewhere (tlog.ErrNotExtension when the store does not
// extend it).
func (l *Log) ProveAgainst(ctx context.Context, idOrPrefix string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error) {
	return l.e.proveAgainst(ctx, idOrPrefix, cp)
}

// ConsistencyFrom proves that the store's log extends a checkpoint kept
// elsewhere, up to the stored checkpoint of newSize (0: the head).
func (l *Log) ConsistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error) {
	return l.e.consistencyFrom(ctx, old, newSize)
}

// checkpoint signs the log's current size and root with the operator key
// and stores the checkpoint.
func (e *Engine) checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error) {
	if !operator.Public().Equal(e.reg.OperatorKey()) {
		return nil, fmt.Errorf("%w: not the operator key of this store", registry.ErrBadKey)
	}
	size, root, err := e.log.Head()
	if err != nil {
		return nil, err
	}
	cp, err := tlog.SignCheckpoint(operator, size, root, e.cfg.clock())
	if err != nil {
		return nil, err
	}
	if err := e.addCheckpoint(ctx, cp); err != nil {
		return nil, err
	}
	return e.storedCheckpoint(cp)
}

// storedCheckpoint is the stored checkpoint of cp's size and root.
func (e *Engine) storedCheckpoint(cp *tlog.Checkpoint) (*tlog.Checkpoint, error) {
	cps, err := e.log.Checkpoints()
	if err != nil {
		return nil, err
	}
	for i := range cps {
		if cps[i].Size == cp.Size && cps[i].Root == cp.Root {
			return &cps[i], nil
		}
	}
	return nil, fmt.Errorf("checkpoint %d: %w", cp.Size, tlog.ErrNoCheckpoint)
}

// logHead is the log's current size and root (hex).
func (e *Engine) logHead(ctx context.Context) (uint64, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	return e.log.Head()
}

// addCheckpoint stores a checkpoint signed elsewhere, after checking the
// operator's signature and that its root is the log's at its size. Stored
// checkpoints are never overwritten: when one of the same size and root is
// stored, that one stays and this is not an error.
func (e *Engine) addCheckpoint(ctx context.Context, cp *tlog.Checkpoint) error {
	err := e.log.AddCheckpoint(ctx, cp)
	if !errors.Is(err, tlog.ErrCheckpointExists) {
		return err
	}
	if _, serr := e.storedCheckpoint(cp); serr != nil {
		return err
	}
	return nil
}

// prove is an inclusion proof of an entry (by ID or prefix), else of a
// decision, against the checkpoint of size (0: the latest), verified.
func (e *Engine) prove(ctx context.Context, idOrPrefix string, size uint64) (*tlog.InclusionProof, error) {
	id, err := e.Resolve(ctx, idOrPrefix)
	if err != nil {
		d, derr := e.Decision(ctx, idOrPrefix)
		if derr != nil {
			return nil, err
		}
		id = d.ID
	}
	return e.log.Prove(id, size)
}

// consistency is a consistency proof between two checkpoints, verified.
func (e *Engine) consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.log.Consistency(oldSize, newSize)
}

// proveAgainst proves an entry (by ID or prefix) or else a decision
// against a checkpoint kept elsewhere, after checking that the store
// extends it (tlog.ErrNotExtension when not).
func (e *Engine) proveAgainst(ctx context.Context, idOrPrefix string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := e.logID(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	return e.log.ProveAgainst(id, cp)
}

// consistencyFrom proves that the store's log extends a checkpoint kept
// elsewhere, up to the stored checkpoint of newSize (0: the current head).
func (e *Engine) consistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.log.ConsistencyFrom(old, newSize)
}

// logID resolves an entry prefix, else a decision ID or prefix.
func (e *Engine) logID(ctx context.Context, idOrPrefix string) (string, error) {
	id, err := e.Resolve(ctx, idOrPrefix)
	if err != nil {
		d, derr := e.Decision(ctx, idOrPrefix)
		if derr != nil {
			return "", err
		}
		id = d.ID
	}
	return id, nil
}

var _ Prover = (*Log)(nil)
