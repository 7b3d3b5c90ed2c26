package kv

import (
	"context"
	"errors"
	"io/fs"
)

// ErrNotFound is what Get returns (wrapped or not) for a key that is not
// stored. It is fs.ErrNotExist, so callers can test for it without
// importing any implementation.
var ErrNotFound = fs.ErrNotExist

// ErrStop, returned by an Iterate callback, ends the walk without error.
var ErrStop = errors.New("kv: stop iterating")

// Txn is one transaction over one owner's rows. A read-only transaction sees
// one consistent snapshot; a read-write one also sees its own writes, and
// commits all of them or none.
//
// Slices passed to Set must not be changed until the transaction ends;
// slices given to an Iterate callback are valid only during the call and
// must not be changed (an implementation may hand over its own rows).
type Txn interface {
	// Get returns a copy of the value at key, or an error that Is
	// ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Has reports whether key is stored.
	Has(key []byte) (bool, error)
	// Set writes key (read-write transactions only).
	Set(key, value []byte) error
	// Delete removes key (read-write transactions only).
	Delete(key []byte) error
	// Iterate calls fn for each stored key with the given prefix, in
	// ascending byte order, with its value when withValues. fn returning
	// ErrStop ends the walk; any other error ends it and is returned.
	Iterate(prefix []byte, withValues bool, fn func(key, value []byte) error) error
}

// Store is one owner's namespace of a store.
type Store interface {
	// View runs fn in a read-only transaction.
	View(fn func(Txn) error) error
	// Commit runs fn in a read-write transaction and makes it durable
	// before returning. Writes waiting at the same moment may share one
	// transaction and one sync (group commit), so fn must do nothing but
	// read and write t, and may be run more than once. size is a rough
	// count of the bytes fn writes.
	Commit(ctx context.Context, size int, fn func(Txn) error) error
}
