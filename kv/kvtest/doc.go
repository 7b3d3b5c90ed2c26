// Package kvtest is the conformance suite of the kv contract (package kv):
// every implementation runs it, so the contract is stated once, as tests,
// and an implementation that drifts from another fails here rather than in
// an owner's rows (tailscale's tstest/chonktest is the model).
//
// An implementation hands Run a function that opens a fresh, empty store
// and returns two of its namespaces and a way to commit one transaction
// over both. The suite then checks: Get, Has, Set and Delete; Iterate's
// order and prefix bounds; a read-write transaction that reads its own
// writes; a View's snapshot, untouched by a Commit that lands while it
// runs; commits that are atomic (a failing fn leaves nothing, and fails no
// other write batched with it); ErrStop; namespaces that cannot see each
// other; and group commit under concurrent writers, serialisable.
//
// It stands beside package kv, as testing/fstest does for io/fs: an
// implementation of the contract outside this module can run it too.
package kvtest
