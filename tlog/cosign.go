package tlog

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/transparency-dev/merkle/proof"
)

// What a witness outside the store needs: the bytes a checkpoint's
// signature covers, a check of that signature against a key it was given,
// and consistency proofs between any two sizes of the log as it is.

// SignedBody is the bytes a checkpoint's signature covers.
func (c *Checkpoint) SignedBody() []byte { return c.signed() }

// VerifyCheckpoint checks that key signed cp.
func VerifyCheckpoint(key ed25519.PublicKey, cp *Checkpoint) error {
	sig, err := base64.StdEncoding.DecodeString(cp.Signature)
	if err != nil || len(key) != ed25519.PublicKeySize || !ed25519.Verify(key, cp.signed(), sig) {
		return fmt.Errorf("checkpoint %d: not signed by this key", cp.Size)
	}
	return nil
}

// ConsistencyHashes prove (hex) that the log's first newSize leaves extend
// its first oldSize, as the log holds them now.
func (l *Log) ConsistencyHashes(oldSize, newSize uint64) ([]string, error) {
	if oldSize > newSize {
		return nil, fmt.Errorf("%w: old size %d is larger than new size %d", ErrMalformed, oldSize, newSize)
	}
	var out []string
	err := l.store.View(func(t kv.Txn) error {
		st, err := readLogState(t)
		if err != nil {
			return err
		}
		if newSize > st.size {
			return fmt.Errorf("%w: the log has %d leaves, not %d", ErrNotExtension, st.size, newSize)
		}
		if oldSize == 0 || oldSize == newSize {
			out = []string{}
			return nil
		}
		nodes, err := proof.Consistency(oldSize, newSize)
		if err != nil {
			return err
		}
		out, err = proofHashes(t, nodes)
		return err
	})
	return out, err
}

// VerifyConsistency checks that hashes prove the tree of newSize leaves
// with root newRoot extends the tree of oldSize leaves with root oldRoot
// (roots and hashes hex).
func VerifyConsistency(oldSize, newSize uint64, oldRoot, newRoot string, hashes []string) error {
	o, err := hex.DecodeString(oldRoot)
	if err != nil {
		return fmt.Errorf("%w: old root", ErrMalformed)
	}
	n, err := hex.DecodeString(newRoot)
	if err != nil {
		return fmt.Errorf("%w: new root", ErrMalformed)
	}
	hs := make([][]byte, len(hashes))
	for i, h := range hashes {
		if hs[i], err = hex.DecodeString(h); err != nil || len(hs[i]) != hasher.Size() {
			return fmt.Errorf("%w: proof hash %d", ErrMalformed, i)
		}
	}
	if oldSize == 0 {
		if len(hs) != 0 {
			return fmt.Errorf("%w: a proof from an empty tree has no hashes", ErrMalformed)
		}
		return nil
	}
	return proof.VerifyConsistency(hasher, oldSize, newSize, hs, o, n)
}
