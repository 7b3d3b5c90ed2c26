package tlog

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"

	"github.com/pedigree-ai/pedigree/kv"
)

// A checkpoint kept outside the data directory is what detects a restored
// old copy of the store, or one rebuilt with another operator key: the
// store must be at least as large as the checkpoint, and its first Size
// leaves must hash to the checkpoint's root.

var (
	// ErrNotExtension: the store is behind a checkpoint kept elsewhere (a
	// smaller log), or its log is not an extension of that checkpoint's.
	ErrNotExtension = errors.New("the store is not an extension of the checkpoint")
	// ErrCheckpointExists: a checkpoint of that size is already stored;
	// stored checkpoints are never overwritten.
	ErrCheckpointExists = errors.New("a checkpoint of that size is already stored")
)

// MaxCheckpointFileBytes bounds a checkpoint file.
const MaxCheckpointFileBytes = 64 << 10

// ParseCheckpoint reads a checkpoint kept elsewhere: what `pedigree log
// checkpoint -o json` prints ({"version": 1, "checkpoint": {...}}), or the
// checkpoint object alone. Unknown fields are refused.
func ParseCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) > MaxCheckpointFileBytes {
		return nil, fmt.Errorf("%w: a checkpoint file over %d bytes", ErrMalformed, MaxCheckpointFileBytes)
	}
	strict := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return err
		}
		if dec.More() {
			return errors.New("trailing data")
		}
		return nil
	}
	var wrapped struct {
		Version    int         `json:"version"`
		Checkpoint *Checkpoint `json:"checkpoint"`
	}
	cp := new(Checkpoint)
	if err := strict(&wrapped); err == nil && wrapped.Checkpoint != nil {
		if wrapped.Version != 1 {
			return nil, fmt.Errorf("%w: checkpoint file version %d", ErrMalformed, wrapped.Version)
		}
		cp = wrapped.Checkpoint
	} else if err := strict(cp); err != nil {
		return nil, fmt.Errorf("%w: not a checkpoint: %v", ErrMalformed, err)
	}
	if raw, err := hex.DecodeString(cp.Root); err != nil || len(raw) != 32 || cp.Signature == "" || cp.Time == "" {
		return nil, fmt.Errorf("%w: a checkpoint needs a size, a 64-hex root, a time and a signature", ErrMalformed)
	}
	return cp, nil
}

// checkExternal checks a checkpoint kept elsewhere against the store: the
// operator signed it, the log has at least its size, and the stored tree at
// its size has its root.
func (l *Log) checkExternal(t kv.Txn, cp *Checkpoint) error {
	if err := l.checkWitnessed(cp); err != nil {
		return fmt.Errorf("%w: the checkpoint is not signed by this store's operator key or its engine key (%v)", ErrNotExtension, err)
	}
	size, ok, err := matches(t, cp)
	switch {
	case err != nil:
		return err
	case cp.Size > size:
		return fmt.Errorf("%w: the store is behind the checkpoint: its log has %d leaves, the checkpoint %d (an old copy restored, or leaves deleted)", ErrNotExtension, size, cp.Size)
	case !ok:
		return fmt.Errorf("%w: the log's first %d leaves do not hash to the checkpoint's root", ErrNotExtension, cp.Size)
	}
	return nil
}

// ProveAgainst builds an inclusion proof for id against a checkpoint kept
// elsewhere, after checking that the store extends it, and verifies it.
func (l *Log) ProveAgainst(id string, cp *Checkpoint) (*InclusionProof, error) {
	if err := l.store.View(func(t kv.Txn) error { return l.checkExternal(t, cp) }); err != nil {
		return nil, err
	}
	return l.prove(id, cp)
}

// ConsistencyFrom proves that the store's log extends a checkpoint kept
// elsewhere: up to the stored checkpoint of newSize, or to the log's
// current head (unsigned) when newSize is 0.
func (l *Log) ConsistencyFrom(old *Checkpoint, newSize uint64) (*ConsistencyProof, error) {
	var n *Checkpoint
	if newSize != 0 {
		var err error
		if n, err = l.checkpoint(newSize); err != nil {
			return nil, err
		}
	}
	p := &ConsistencyProof{Old: *old, Hashes: []string{}}
	err := l.store.View(func(t kv.Txn) error {
		if err := l.checkExternal(t, old); err != nil {
			return err
		}
		if n == nil {
			st, err := readLogState(t)
			if err != nil {
				return err
			}
			root, err := rootAt(t, st.size)
			if err != nil {
				return err
			}
			n = &Checkpoint{Size: st.size, Root: hex.EncodeToString(root)}
		}
		if n.Size < old.Size {
			return fmt.Errorf("%w: checkpoint %d is older than the checkpoint kept elsewhere (%d)", ErrMalformed, n.Size, old.Size)
		}
		p.New = *n
		nodes, err := proof.Consistency(old.Size, n.Size)
		if err != nil {
			return err
		}
		p.Hashes, err = proofHashes(t, nodes)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := p.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotExtension, err)
	}
	return p, nil
}
