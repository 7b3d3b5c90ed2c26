// Package tampertest is the store-rebuild attack, for tests: what a writer of
// the data directory who holds no key can do to the log (Rebuild: keep every
// signed byte, rewrite everything derived), so that tests can show what
// verify and a witness name afterwards.
//
// It is test support, in testkit/ above the engine (the root package) and
// the command: only tests import it, never code that ships (TestLayers in
// internal/store). It is public because the one private place Go offers,
// internal/, holds the engine's parts below the root, and test support sits
// above the root: apart, every import runs one way. Its API follows what
// pedigree's tests need, outside the changelog's promise.
package tampertest
