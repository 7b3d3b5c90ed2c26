package fleet

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// The chain binds every record to its place in the stream. A node folds
// each record it reads, in stream order, into a running hash:
//
//	chain(1)   = SHA-256("pedigree fleet chain v1\n" || SHA-256(genesis))
//	chain(seq) = SHA-256(chain(seq-1) || seq || len(subject) || subject || SHA-256(data))
//
// Records it refuses count too: every node folds the same stream. Nodes
// publish checkpoints (Kind Checkpoint) signed by their engine key over a
// sequence and the chain there; a node that reads a checkpoint compares it
// with its own chain at that sequence, so a record dropped, reordered,
// inserted or altered anywhere before a checkpoint is found by every node
// that reads the checkpoint after it (see the engine's fleetchain.go).

// Chain is the running hash of a stream up to a record.
type Chain [sha256.Size]byte

// GenesisChain is the chain at the genesis (sequence 1).
func GenesisChain(genesis []byte) Chain {
	g := sha256.Sum256(genesis)
	h := sha256.New()
	h.Write([]byte("pedigree fleet chain v1\n"))
	h.Write(g[:])
	var c Chain
	h.Sum(c[:0])
	return c
}

// Next is the chain after the record at seq on subject with data.
func (c Chain) Next(seq uint64, subject string, data []byte) Chain {
	d := sha256.Sum256(data)
	b := make([]byte, 0, len(c)+12+len(subject)+len(d))
	b = append(b, c[:]...)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint32(b, uint32(len(subject)))
	b = append(b, subject...)
	b = append(b, d[:]...)
	return sha256.Sum256(b)
}

// ErrRewritten: the stream is not the one this node read, or not an
// extension of what its witness holds: records were dropped, reordered,
// inserted or altered, or its end was cut. The node stops applying (it
// is not ready, and writes nothing) and says why.
var ErrRewritten = errors.New("the fleet's stream was rewritten")
