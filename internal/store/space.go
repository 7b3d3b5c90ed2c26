package store

import (
	"context"

	"github.com/pedigree-ai/pedigree/kv"
)

// Namespace is the key prefix of one owner of stored facts (see doc.go).
type Namespace string

// The namespaces, one per owner, declared here and nowhere else.
const (
	nsMeta = "meta/"
	// Registry: principals, τ, the operator key, the freeze record.
	Registry Namespace = "reg/"
	// Lineage: entries, their nodes and content, sessions' contexts, recalls.
	Lineage Namespace = "lin/"
	// Log: the Merkle log's leaves, subtree hashes, state and checkpoints.
	Log Namespace = "l/"
	// Decisions: the decision log, approvals' index and uses, trajectories.
	Decisions Namespace = "dec/"
	// Refusals: the refusal log (the engine's refusal.go).
	Refusals Namespace = "rf/"
	// Fleet: a fleet node's place in the fleet's stream (the sequence of
	// the last record it applied, written in the same commit).
	Fleet Namespace = "flt/"
)

// Namespaces lists every owner's namespace (the store's own meta/ aside).
var Namespaces = []Namespace{Registry, Lineage, Log, Decisions, Refusals, Fleet}

// Space is one owner's namespace of the store: the kv.Store an owner is
// handed.
type Space struct {
	db *DB
	ns Namespace
}

var _ kv.Store = (*Space)(nil)

// Space returns namespace ns of the store.
func (d *DB) Space(ns Namespace) *Space { return &Space{db: d, ns: ns} }

// View runs fn in a read-only transaction over the namespace.
func (s *Space) View(fn func(kv.Txn) error) error {
	return s.db.View(func(t *Txn) error { return fn(t.In(s.ns)) })
}

// Commit runs fn durably over the namespace, through the group committer.
func (s *Space) Commit(ctx context.Context, size int, fn func(kv.Txn) error) error {
	return s.db.Commit(ctx, size, func(t *Txn) error { return fn(t.In(s.ns)) })
}
