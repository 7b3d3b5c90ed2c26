// Package enginetest builds small worlds for tests: an in-memory engine with
// named principals and their keys, a clock the test controls, and a check
// on cleanup that the store still verifies end to end (signatures, IDs,
// edges, labels), so every test that touches the graph re-checks the
// invariants.
//
// It is test support, in testkit/ above the engine (the root package) and
// the command: only tests import it, never code that ships (TestLayers in
// internal/store). It is public because the one private place Go offers,
// internal/, holds the engine's parts below the root, and test support sits
// above the root: apart, every import runs one way. Its API follows what
// pedigree's tests need, outside the changelog's promise.
//
// World.Tamper hands its function the store's transaction, a type internal
// to this module: only pedigree's own tests can write one.
package enginetest
