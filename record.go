package pedigree

import (
	"errors"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
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

// committed tells the owners that the transaction holding apply(r)
// committed (the graph caches a new node: the next check reads it).
func (r *record) committed() {
	if r.entry != nil && r.existing == nil {
		r.entry.Committed()
	}
}

var errUnknownRecord = errors.New("unknown kind of record")
