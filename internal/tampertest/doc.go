// Package tampertest is the store-rebuild attack, for tests: what a writer of
// the data directory who holds no key can do to the log (Rebuild: keep every
// signed byte, rewrite everything derived), so that tests can show what
// verify and a witness name afterwards.
package tampertest
