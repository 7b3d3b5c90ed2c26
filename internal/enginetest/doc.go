// Package enginetest builds small worlds for tests: an in-memory engine with
// named principals and their keys, a clock the test controls, and a check
// on cleanup that the store still verifies end to end (signatures, IDs,
// edges, labels), so every test that touches the graph re-checks the
// invariants.
package enginetest
