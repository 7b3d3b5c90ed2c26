package pedigree

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
)

// A record's signature binds its node, kind, subject and bytes, not its
// place in the stream: whoever may delete the stream (whoever administers
// the NATS servers) could make it again with the genuine records it
// chooses. The place is bound by fleet checkpoints, and the stream's end
// by a witness outside it.
//
// Every node folds each record into the stream's chain (fleet.Chain) as it
// applies it, and stores the chain at each sequence. After every
// CheckpointEvery records it publishes, every CheckpointInterval while it
// has published since, when it closes, and at once after a use of an
// approval, a node
// publishes a checkpoint: a record of kind checkpoint, signed with its
// engine key like every record, over the last sequence it applied and the
// chain there. A node that reads a checkpoint compares it with its own
// chain at that sequence: a record dropped, reordered, inserted or altered
// before it, or the checkpoint itself moved, makes them differ, and the
// node stops applying (fleet.ErrRewritten: not ready, no writes, verify
// names it). A node reading a stream rewritten that way from an empty
// directory stops at the first genuine checkpoint after the change.
//
// What no checkpoint in the stream can show is a cut end: a stream made
// again without its last records and their checkpoints is consistent. So
// each node keeps the latest checkpoint it verified in a witness file
// outside its data directory (FleetOptions.Witness; serve keeps it in the
// keys directory), and holds the stream to it: the record at the witnessed
// sequence must have the witnessed chain, and until the node has applied
// that far it writes nothing and is not ready. A node rebuilt from an
// empty directory with the same witness refuses a cut stream the same way.
//
// What stays unprotected: the records after the last checkpoint a node
// witnessed (at most CheckpointEvery records or CheckpointInterval of any
// node's writes, never an approval's use: the node that uses an approval
// checkpoints and witnesses at once, and a use it could not witness is an
// error), and every record of a node without a witness, whose stream can be
// cut back to any earlier checkpoint.

// fleetCheckpoint is what a node signs in a checkpoint record.
type fleetCheckpoint struct {
	Seq   uint64 `json:"seq"`
	Chain string `json:"chain"`
}

// fleetWitness is a witness file: the latest checkpoint a node verified,
// as the signed record it read.
type fleetWitness struct {
	Version int    `json:"version"`
	Seq     uint64 `json:"seq"`
	Chain   string `json:"chain"`
	Record  []byte `json:"record"`
	// At is the checkpoint record's own place in the stream (0 in a
	// witness of an earlier release): a node started again checks the
	// stream still holds it there.
	At uint64 `json:"at,omitempty"`
}

// maxFleetWitnessBytes bounds a witness file.
const maxFleetWitnessBytes = 64 << 10

// chainKey is the store key of the stream's chain at seq.
func chainKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte("c"), seq) }

// chainAt is the stream's chain at seq as this node stored it.
func (l *fleetLink) chainAt(t *store.Txn, seq uint64) (fleet.Chain, bool, error) {
	if seq == 1 {
		return l.genesis, true, nil
	}
	var c fleet.Chain
	b, err := t.In(store.Fleet).Get(chainKey(seq))
	if errors.Is(err, store.ErrNotFound) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	if len(b) != len(c) {
		return c, false, fmt.Errorf("the fleet chain at %d is %d bytes", seq, len(b))
	}
	copy(c[:], b)
	return c, true, nil
}

// decodeCheckpoint opens a checkpoint record published as key.
func (e *Engine) decodeCheckpoint(key string, data []byte) (fleetCheckpoint, fleet.Chain, string, error) {
	var cp fleetCheckpoint
	var c fleet.Chain
	rec, signer, err := e.openRecord(fleet.Checkpoint, key, data)
	if err != nil {
		return cp, c, "", err
	}
	dec := json.NewDecoder(bytes.NewReader(rec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		return cp, c, "", fmt.Errorf("a checkpoint that does not decode: %v", err)
	}
	b, err := hex.DecodeString(cp.Chain)
	if err != nil || len(b) != len(c) || key != strconv.FormatUint(cp.Seq, 10) || cp.Seq < 1 {
		return cp, c, "", fmt.Errorf("a checkpoint of %d keyed %q with a malformed chain", cp.Seq, key)
	}
	copy(c[:], b)
	return cp, c, signer, nil
}

// applyCheckpoint checks the checkpoint record at seq against this node's
// chain, and witnesses it. A checkpoint no certified engine signed is
// refused like any such record; a signed one that disagrees with the
// chain stops the node.
func (l *fleetLink) applyCheckpoint(ctx context.Context, seq uint64, key string, data []byte, chain fleet.Chain) error {
	e := l.e
	cp, want, signer, err := e.decodeCheckpoint(key, data)
	if err == nil {
		err = e.db.View(func(t *store.Txn) error {
			if cp.Seq >= seq {
				return fmt.Errorf("%w: record %d is a checkpoint of %s over record %d, which comes after it: the stream was reordered", fleet.ErrRewritten, seq, signer, cp.Seq)
			}
			got, ok, err := l.chainAt(t, cp.Seq)
			if err != nil {
				return err
			}
			if !ok || got != want {
				return fmt.Errorf("%w: record %d is a checkpoint of %s over the first %d records, which this node read otherwise: "+
					"a record before it was dropped, reordered, inserted or altered since %s signed it", fleet.ErrRewritten, seq, signer, cp.Seq, signer)
			}
			return nil
		})
		if errors.Is(err, fleet.ErrRewritten) {
			return err
		}
	}
	if cerr := e.db.Commit(ctx, 64, func(t *store.Txn) error { return l.setApplied(t, seq, chain) }); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("%w: checkpoint record %d: %w", fleet.ErrRefused, seq, err)
	}
	l.witness(seq, cp.Seq, want, data)
	return nil
}

// witness keeps the checkpoint record data at at (verified: over seq, with
// chain) in the node's witness file when it is newer than the one there.
func (l *fleetLink) witness(at, seq uint64, chain fleet.Chain, data []byte) {
	if l.witnessFile == "" {
		return
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if seq <= l.wSeq {
		return
	}
	b, err := json.Marshal(fleetWitness{Version: 1, Seq: seq, Chain: hex.EncodeToString(chain[:]), Record: data, At: at})
	if err == nil {
		err = safefile.WriteFile(filepath.Dir(l.witnessFile), filepath.Base(l.witnessFile), append(b, '\n'), 0o600)
	}
	if err != nil {
		l.e.cfg.log.Warn("the fleet's checkpoint could not be witnessed", "witness", l.witnessFile, "seq", seq, "error", err)
		return
	}
	l.wSeq, l.wChain, l.wAt, l.wRec = seq, chain, at, data
}

// witnessed is the sequence and chain the node's witness holds (0: none).
func (l *fleetLink) witnessed() (uint64, fleet.Chain) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.wSeq, l.wChain
}

// readFleetWitness reads a node's witness file into l, checking its
// signature (nothing when there is none yet).
func (l *fleetLink) readFleetWitness(path string) error {
	b, err := safefile.ReadFile(filepath.Dir(path), filepath.Base(path), maxFleetWitnessBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: the fleet's witness %s: %v", ErrFleet, path, err)
	}
	var w fleetWitness
	if err := json.Unmarshal(b, &w); err != nil || w.Version != 1 {
		return fmt.Errorf("%w: the fleet's witness %s is not a witness file (version 1): %v", ErrFleet, path, err)
	}
	cp, chain, _, err := l.e.decodeCheckpoint(strconv.FormatUint(w.Seq, 10), w.Record)
	if err != nil || cp.Seq != w.Seq || cp.Chain != w.Chain || (w.At != 0 && w.At <= w.Seq) {
		return fmt.Errorf("%w: the fleet's witness %s does not hold a checkpoint signed by a node of this fleet: %v", ErrFleet, path, err)
	}
	l.wSeq, l.wChain, l.wAt, l.wRec = w.Seq, chain, w.At, w.Record
	return nil
}

// holdToWitness checks, at join, a directory that applied the stream past
// its witness against it, and that the stream still holds the witnessed
// checkpoint at its place (records before it changed, with the record at
// the directory's last sequence kept, would not show otherwise).
func (l *fleetLink) holdToWitness(ctx context.Context) error {
	seq, want := l.witnessed()
	if seq == 0 {
		return nil
	}
	var applied uint64
	err := l.e.db.View(func(t *store.Txn) error {
		var err error
		if applied, _, err = l.applied(t); err != nil || applied < seq {
			return err
		}
		got, ok, err := l.chainAt(t, seq)
		if err != nil {
			return err
		}
		if !ok || got != want {
			return fmt.Errorf("%w: this directory read the first %d records otherwise than its witness %s", fleet.ErrRewritten, seq, l.witnessFile)
		}
		return nil
	})
	if err != nil || l.wAt == 0 || applied < l.wAt {
		return err
	}
	subj, data, err := l.n.Record(ctx, l.wAt)
	if err != nil && !errors.Is(err, fleet.ErrNoRecord) {
		return fmt.Errorf("%w: read record %d of the stream: %v", ErrFleet, l.wAt, err)
	}
	if err != nil || !bytes.Equal(data, l.wRec) {
		return fmt.Errorf("%w: the stream no longer holds, at %d, the checkpoint its witness %s holds: it was deleted and made again", fleet.ErrRewritten, l.wAt, l.witnessFile)
	}
	l.n.Anchor(l.wAt, subj, data)
	return nil
}

// writable is why this node may not write now (nil when it may): its
// applier stopped at a rewritten stream, or it has not yet applied the
// stream as far as its witness saw it.
func (l *fleetLink) writable(ctx context.Context) error {
	if err := l.n.Halted(); err != nil {
		return err
	}
	wseq, _ := l.witnessed()
	applied, _ := l.n.Head()
	if applied >= wseq {
		return nil
	}
	last, err := l.n.LastSeq(ctx)
	if err == nil && last < wseq {
		return fmt.Errorf("%w: the stream holds %d records, this node's witness saw %d: its end was cut (nothing is written until it is restored)", fleet.ErrRewritten, last, wseq)
	}
	return fmt.Errorf("%w: this node has applied %d records of the stream, its witness saw %d: it writes once it has read that far", fleet.ErrLagging, applied, wseq)
}

// published counts a record this node published and checkpoints when it
// is due: every CheckpointEvery records (in the background, one at a
// time: the writers do not wait), and at once after a use of an approval,
// whose checkpoint must be witnessed before the use is answered (else the
// error: the caller denies).
func (l *fleetLink) published(ctx context.Context, kind fleet.Kind) error {
	if kind == fleet.Use {
		l.cpmu.Lock()
		defer l.cpmu.Unlock()
		return l.checkpoint(ctx)
	}
	l.cmu.Lock()
	l.count++
	due := l.count >= l.e.cfg.checkpointEvery
	l.cmu.Unlock()
	// The count is reset only by the checkpoint that covers it: records
	// that come due while another checkpoint runs stay counted, for the
	// next record or the ticker.
	if due && l.cpmu.TryLock() {
		l.resetCount()
		go func() {
			defer l.cpmu.Unlock()
			if err := l.checkpoint(l.loopCtx); err != nil {
				l.retryCount()
				l.e.cfg.log.Warn("the fleet's stream could not be checkpointed", "error", err)
			}
		}()
	}
	return nil
}

// checkpoint publishes this node's checkpoint of the stream up to the last
// record it applied, and waits until it has applied (and witnessed) it.
// The caller holds cpmu.
func (l *fleetLink) checkpoint(ctx context.Context) error {
	seq, chain := l.n.Head()
	l.cmu.Lock()
	done := seq <= l.lastCP
	l.cmu.Unlock()
	if done {
		return nil
	}
	rec, err := json.Marshal(fleetCheckpoint{Seq: seq, Chain: hex.EncodeToString(chain[:])})
	if err != nil {
		return err
	}
	key := strconv.FormatUint(seq, 10)
	data, err := l.e.sealRecord(fleet.Checkpoint, key, rec)
	if err != nil {
		return err
	}
	if _, err := l.n.Publish(ctx, fleet.Checkpoint, key, l.e.engineID+":"+key, data, false); err != nil {
		return fmt.Errorf("the fleet's checkpoint at %d: %w", seq, err)
	}
	if w, _ := l.witnessed(); l.witnessFile != "" && w < seq {
		return fmt.Errorf("the fleet's checkpoint at %d was not witnessed in %s", seq, l.witnessFile)
	}
	l.cmu.Lock()
	l.lastCP = seq
	l.cmu.Unlock()
	return nil
}

// resetCount starts the count of records published since the last
// checkpoint again, before one that covers them (the caller holds cpmu).
func (l *fleetLink) resetCount() {
	l.cmu.Lock()
	l.count = 0
	l.cmu.Unlock()
}

// retryCount leaves the records a checkpoint that failed covered counted,
// so that the ticker tries again.
func (l *fleetLink) retryCount() {
	l.cmu.Lock()
	l.count = max(l.count, 1)
	l.cmu.Unlock()
}

// checkpointLoop checkpoints every CheckpointInterval while this node has
// published records since its last checkpoint, until its applier stops.
func (l *fleetLink) checkpointLoop() {
	done := l.n.Done()
	ctx, cancel := context.WithCancel(context.Background())
	l.loopCtx = ctx
	go func() {
		defer cancel()
		t := time.NewTicker(l.e.cfg.checkpointInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.cmu.Lock()
				due := l.count > 0
				l.cmu.Unlock()
				if due && l.cpmu.TryLock() {
					l.resetCount()
					if err := l.checkpoint(ctx); err != nil {
						l.retryCount()
						l.e.cfg.log.Warn("the fleet's stream could not be checkpointed", "error", err)
					}
					l.cpmu.Unlock()
				}
			}
		}
	}()
}

// applied reads this node's place in the stream and the chain there (1
// and the genesis's chain when it applied nothing).
func (l *fleetLink) applied(t *store.Txn) (uint64, fleet.Chain, error) {
	var c fleet.Chain
	b, err := t.In(store.Fleet).Get(keyApplied)
	if errors.Is(err, store.ErrNotFound) {
		return 1, l.genesis, nil
	}
	if err != nil {
		return 0, c, err
	}
	if len(b) != 8+len(c) {
		return 0, c, fmt.Errorf("%w: this directory's place in the stream is %d bytes, without the stream's chain: it was made by an earlier release; "+
			"delete it and let the node make it again from the stream", ErrFleet, len(b))
	}
	copy(c[:], b[8:])
	return binary.BigEndian.Uint64(b), c, nil
}

// setApplied stores seq as applied, with the stream's chain there.
func (l *fleetLink) setApplied(t *store.Txn, seq uint64, chain fleet.Chain) error {
	ft := t.In(store.Fleet)
	if err := ft.Set(chainKey(seq), chain[:]); err != nil {
		return err
	}
	return ft.Set(keyApplied, append(binary.BigEndian.AppendUint64(nil, seq), chain[:]...))
}

// rewritten is why the node holds its stream rewritten (nil when it does
// not): verify names it. It checks the stream as a barrier does, so that
// verify asked first after a rewrite names it too.
func (l *fleetLink) rewritten(ctx context.Context) error {
	if err := l.n.Holds(ctx); err != nil {
		return err
	}
	if err := l.writable(ctx); errors.Is(err, fleet.ErrRewritten) {
		return err
	}
	return nil
}

// close checkpoints what this node published since its last checkpoint,
// then leaves the fleet.
func (l *fleetLink) close() {
	l.cmu.Lock()
	due := l.count > 0
	l.cmu.Unlock()
	if due && l.n.Halted() == nil {
		l.cpmu.Lock()
		if err := l.checkpoint(l.loopCtx); err != nil {
			l.e.cfg.log.Warn("the fleet's stream could not be checkpointed at close", "error", err)
		}
		l.cpmu.Unlock()
	}
	l.n.Close()
}

// holdToStream checks, at join, that the stream still holds, at the last
// sequence this directory applied, the record it applied there: a stream
// made again since (shorter, or with other records before) is refused
// before the node applies or writes anything.
func (l *fleetLink) holdToStream(ctx context.Context) error {
	var seq uint64
	var got, prev fleet.Chain
	err := l.e.db.View(func(t *store.Txn) error {
		var err error
		if seq, got, err = l.applied(t); err != nil || seq < 2 {
			return err
		}
		var ok bool
		if prev, ok, err = l.chainAt(t, seq-1); err == nil && !ok {
			err = fmt.Errorf("%w: this directory holds no chain at %d", ErrFleet, seq-1)
		}
		return err
	})
	if err != nil || seq < 2 {
		return err
	}
	subj, data, err := l.n.Record(ctx, seq)
	if errors.Is(err, fleet.ErrNoRecord) {
		return fmt.Errorf("%w: the stream holds no record %d, which this directory applied: it was deleted and made again, or cut", fleet.ErrRewritten, seq)
	}
	if err != nil {
		return fmt.Errorf("%w: read record %d of the stream: %v", ErrFleet, seq, err)
	}
	if prev.Next(seq, subj, data) != got {
		return fmt.Errorf("%w: record %d of the stream is not the one this directory applied there", fleet.ErrRewritten, seq)
	}
	return nil
}

var keyApplied = []byte("applied")
