package pedigree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/tlog"
)

// Witnesses keep the log's checkpoints outside the data directory without
// anyone remembering to. The engine signs a checkpoint (the log's size and
// root) with its engine key every CheckpointEvery leaves, every
// CheckpointInterval, when it closes, and at once after a decision that
// spent an approval, and hands it to each witness. A witness file holds
// the latest: it is replaced only by a checkpoint that extends it, so a
// store cut back or rewritten before it is refused for writing (and named
// by verify) instead of being witnessed again. Every leaf up to the
// witnessed size is protected; the leaves after it are the unwitnessed
// tail (Report.LogSize - Report.Witnessed).

// Defaults of WithCheckpointEvery: the unprotected tail is at most this
// many leaves, or this long.
const (
	DefaultCheckpointEvery    = 64
	DefaultCheckpointInterval = 5 * time.Second
)

// WithWitnessFile hands the engine's checkpoints to a file witness at path
// (outside the data directory; the CLI keeps one in the keys directory).
func WithWitnessFile(path string) Option {
	return func(c *config) { c.witnessFiles = append(c.witnessFiles, path) }
}

// WithCheckpointEvery sets how often the engine checkpoints for its
// witnesses: every n leaves, or every d (0 keeps a default). On a fleet
// node it sets how often the node checkpoints the fleet's stream: every n
// records it publishes, or every d while it has published since (see
// fleetchain.go).
func WithCheckpointEvery(n int, d time.Duration) Option {
	return func(c *config) {
		if n > 0 {
			c.checkpointEvery = n
		}
		if d > 0 {
			c.checkpointInterval = d
		}
	}
}

// ErrWitness: the store is not an extension of what a witness holds: it
// was cut back or rewritten since. Nothing more is logged to it.
var ErrWitness = errors.New("the store is not an extension of its witnessed checkpoint")

// readWitness reads the checkpoint a witness file holds (nil when none).
func readWitness(path string) (*tlog.Checkpoint, error) {
	b, err := safefile.ReadFile(filepath.Dir(path), filepath.Base(path), tlog.MaxCheckpointFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return tlog.ParseCheckpoint(b)
}

// witnessed are the checkpoints the engine's witnesses hold.
func (e *Engine) witnessed() ([]tlog.Checkpoint, error) {
	var out []tlog.Checkpoint
	for _, p := range e.cfg.witnessFiles {
		cp, err := readWitness(p)
		if err != nil {
			return nil, fmt.Errorf("witness %s: %w", p, err)
		}
		if cp != nil {
			out = append(out, *cp)
		}
	}
	return out, nil
}

// checkWitnesses holds the store to its witnesses at open: a store behind
// a witnessed checkpoint, or not an extension of it, is refused for
// writing (e.witnessErr), with the reason; reads and verify go on.
func (e *Engine) checkWitnesses() {
	if len(e.cfg.witnessFiles) == 0 || e.cfg.fleetNode {
		return
	}
	cps, err := e.witnessed()
	if err != nil {
		e.refuseWrites(fmt.Errorf("%w: %v", ErrWitness, err))
		return
	}
	for _, cp := range cps {
		if err := e.extends(&cp); err != nil {
			e.refuseWrites(err)
			return
		}
		e.witnessedSize = max(e.witnessedSize, cp.Size)
	}
	e.lastWitness = e.cfg.clock()
}

// witnessRefusal is why nothing may be logged: the store is not an
// extension of what its witnesses hold (nil when it is).
func (e *Engine) witnessRefusal() error {
	e.witnessErrMu.Lock()
	defer e.witnessErrMu.Unlock()
	return e.witnessErr
}

// refuseWrites records why nothing more may be logged.
func (e *Engine) refuseWrites(err error) {
	e.witnessErrMu.Lock()
	e.witnessErr = err
	e.witnessErrMu.Unlock()
}

// extends checks that the log extends cp.
func (e *Engine) extends(cp *tlog.Checkpoint) error {
	if err := e.log.CheckSigned(cp); err != nil {
		return fmt.Errorf("%w: the witnessed checkpoint (size %d) is not signed by this store's keys", ErrWitness, cp.Size)
	}
	root, size, err := e.log.RootAt(cp.Size)
	if errors.Is(err, tlog.ErrNotExtension) {
		return fmt.Errorf("%w: the log has %d leaves, its witness saw %d: leaves were deleted from its end, or an old copy was restored", ErrWitness, size, cp.Size)
	}
	if err != nil {
		return err
	}
	if root != cp.Root {
		return fmt.Errorf("%w: the log's first %d leaves do not hash to the witnessed root: a leaf before it was deleted, reordered or rewritten", ErrWitness, cp.Size)
	}
	return nil
}

// afterCommit checkpoints for the witnesses when it is time: every
// CheckpointEvery leaves, every CheckpointInterval, and at once after a
// decision that spent an approval (whose use must not be cut from the
// tail). A checkpoint that could not be witnessed after an approval's use
// is an error: the caller denies.
func (e *Engine) afterCommit(r *record) error {
	if len(e.cfg.witnessFiles) == 0 || e.cfg.fleetNode {
		return nil
	}
	spent := r.kind == recDecision && r.decision != nil && r.decision.Approval != ""
	e.witnessMu.Lock()
	e.pending++
	due := spent || e.pending >= e.cfg.checkpointEvery || e.cfg.clock().Sub(e.lastWitness) >= e.cfg.checkpointInterval
	e.witnessMu.Unlock()
	if !due {
		return nil
	}
	err := e.Witness(context.Background())
	if err != nil && !spent {
		e.cfg.log.Warn("the log could not be witnessed", "error", err)
		return nil
	}
	return err
}

// Witness signs the log's head with the engine key and hands it to every
// witness, each of which keeps it only if it extends what it holds.
func (e *Engine) Witness(ctx context.Context) error {
	if len(e.cfg.witnessFiles) == 0 || e.cfg.fleetNode {
		return nil
	}
	e.witnessMu.Lock()
	defer e.witnessMu.Unlock()
	if err := e.witnessRefusal(); err != nil {
		return err
	}
	size, root, err := e.log.Head()
	if err != nil {
		return err
	}
	if size == e.witnessedSize && e.pending == 0 {
		return nil // nothing new: a reader never writes its witness
	}
	if e.engine == nil {
		return e.engineErr
	}
	cp, err := tlog.SignCheckpoint(e.engine, size, root, e.cfg.clock())
	if err != nil {
		return err
	}
	b, err := json.Marshal(struct {
		Version    int              `json:"version"`
		Checkpoint *tlog.Checkpoint `json:"checkpoint"`
	}{1, cp})
	if err != nil {
		return err
	}
	for _, p := range e.cfg.witnessFiles {
		old, err := readWitness(p)
		if err != nil {
			return fmt.Errorf("witness %s: %w", p, err)
		}
		if old != nil {
			if err := e.extends(old); err != nil {
				e.refuseWrites(err)
				return err
			}
			if old.Size > size {
				continue
			}
		}
		if err := safefile.WriteFile(filepath.Dir(p), filepath.Base(p), append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("witness %s: %w", p, err)
		}
	}
	e.witnessedSize, e.pending, e.lastWitness = size, 0, e.cfg.clock()
	return nil
}

// witnessLoop checkpoints every CheckpointInterval while the engine is
// open, so that an idle store's tail is witnessed too.
func (e *Engine) witnessLoop() {
	if len(e.cfg.witnessFiles) == 0 || e.cfg.fleetNode {
		return
	}
	e.stopWitness = make(chan struct{})
	e.witnessDone = make(chan struct{})
	go func() {
		defer close(e.witnessDone)
		t := time.NewTicker(e.cfg.checkpointInterval)
		defer t.Stop()
		for {
			select {
			case <-e.stopWitness:
				return
			case <-t.C:
				if err := e.Witness(context.Background()); err != nil {
					e.cfg.log.Warn("the log could not be witnessed", "error", err)
				}
			}
		}
	}()
}
