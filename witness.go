package pedigree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/witness"
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

// httpWitnessTimeout bounds one exchange with an HTTP witness.
const httpWitnessTimeout = 10 * time.Second

// addToWitness offers cp to an HTTP witness with a proof from the size it
// holds (asked again on a conflict). A witness that holds more than the
// log, or refuses the proof, holds the store rewritten: nothing more is
// logged.
func (e *Engine) addToWitness(ctx context.Context, w *httpWitness, cp *tlog.Checkpoint) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.size
	for range 2 {
		if old > cp.Size {
			return e.witnessRefused(ctx, w, fmt.Sprintf("it says it holds %d leaves, the log has %d", old, cp.Size))
		}
		proof, err := e.log.ConsistencyHashes(old, cp.Size)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, httpWitnessTimeout)
		err = w.c.Add(cctx, old, proof, cp)
		cancel()
		var sc *witness.SizeConflict
		switch {
		case err == nil:
			w.size = cp.Size
			return nil
		case errors.As(err, &sc):
			old = sc.Size
			continue
		case errors.Is(err, witness.ErrRefused):
			return e.witnessRefused(ctx, w, err.Error())
		default:
			return err
		}
	}
	return fmt.Errorf("witness %s: its size kept changing", w.c.URL)
}

// witnessRefused holds the store rewritten (nothing more is logged) for
// a witness's refusal, or a size it holds beyond the log, only when what
// it holds, asked again (its answer signed over a fresh challenge),
// confirms it: a refusal or a 409 is not signed, and whoever is between
// the store and its witness could answer one. Else the refusal is an error
// of this checkpoint only (w.size is left to the next answer).
func (e *Engine) witnessRefused(ctx context.Context, w *httpWitness, refusal string) error {
	for _, k := range e.engineKeyList() {
		cctx, cancel := context.WithTimeout(ctx, httpWitnessTimeout)
		held, err := w.c.Latest(cctx, k)
		cancel()
		if err != nil {
			return fmt.Errorf("witness %s: %s, and what it holds could not be read: %v", w.c.URL, refusal, err)
		}
		if held == nil {
			continue
		}
		if err := e.extends(held); err != nil {
			e.refuseWrites(err)
			return err
		}
		w.size = held.Size
	}
	return fmt.Errorf("witness %s: %s, but what it holds (signed) is extended by the log: an answer not from the witness", w.c.URL, refusal)
}

// ErrWitness: the store is not an extension of what a witness holds: it
// was cut back or rewritten since. Nothing more is logged to it.
var ErrWitness = errors.New("the store is not an extension of its witnessed checkpoint")

// witnessOutside refuses a witness file inside the data directory dir:
// whoever writes the directory could put an older checkpoint there, or
// none, and the witness would hold the store to nothing.
func witnessOutside(dir, path string) error {
	if dir == "" {
		return nil
	}
	real := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return filepath.Clean(p)
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			return r
		}
		if r, err := filepath.EvalSymlinks(filepath.Dir(a)); err == nil {
			return filepath.Join(r, filepath.Base(a))
		}
		return a
	}
	d, w := real(dir), real(path)
	if rel, err := filepath.Rel(d, w); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%w: the witness file %s is inside the data directory %s: whoever writes the directory could roll it back; keep it outside (the keys directory)", ErrWitness, path, dir)
	}
	return nil
}

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

// witnessed are the checkpoints the engine's witnesses hold (an HTTP
// witness is asked).
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
	for _, w := range e.cfg.witnessHTTP {
		for _, k := range e.engineKeyList() {
			ctx, cancel := context.WithTimeout(context.Background(), httpWitnessTimeout)
			cp, err := w.c.Latest(ctx, k)
			cancel()
			if err != nil {
				return nil, err
			}
			if cp != nil {
				out = append(out, *cp)
				w.mu.Lock()
				w.size = max(w.size, cp.Size)
				w.mu.Unlock()
			}
		}
	}
	return out, nil
}

// hasWitnesses: the engine hands its checkpoints to witnesses (a fleet
// node's are its fleet checkpoints: fleetchain.go).
func (e *Engine) hasWitnesses() bool {
	return len(e.cfg.witnessFiles)+len(e.cfg.witnessHTTP) > 0 && !e.cfg.fleetNode
}

// checkWitnesses holds the store to its witnesses at open: a store behind
// a witnessed checkpoint, or not an extension of it, is refused for
// writing (e.witnessErr), with the reason; reads and verify go on.
func (e *Engine) checkWitnesses() {
	if !e.hasWitnesses() {
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
	if !e.hasWitnesses() {
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
	err := e.witness(context.Background())
	if err != nil && !spent {
		e.cfg.log.Warn("the log could not be witnessed", "error", err)
		return nil
	}
	return err
}

// witness signs the log's head with the engine key and hands it to every
// witness, each of which keeps it only if it extends what it holds (an
// HTTP witness checks a consistency proof from the size it holds).
func (e *Engine) witness(ctx context.Context) error {
	if !e.hasWitnesses() {
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
	for _, w := range e.cfg.witnessHTTP {
		if err := e.addToWitness(ctx, w, cp); err != nil {
			return err
		}
	}
	e.witnessedSize, e.pending, e.lastWitness = size, 0, e.cfg.clock()
	return nil
}

// witnessLoop checkpoints every CheckpointInterval while the engine is
// open, so that an idle store's tail is witnessed too.
func (e *Engine) witnessLoop() {
	if !e.hasWitnesses() {
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
				if err := e.witness(context.Background()); err != nil {
					e.cfg.log.Warn("the log could not be witnessed", "error", err)
				}
			}
		}
	}()
}

// Witness signs the log's head with the engine key and hands it to every
// witness, each of which keeps it only if it extends what it holds.
func (l *Log) Witness(ctx context.Context) error { return l.e.witness(ctx) }
