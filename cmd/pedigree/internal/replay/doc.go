// Package replay runs recorded agent sessions (scenarios, see
// docs/SCENARIOS.md and testdata/scenarios) through the real engine, each in
// a fresh in-memory store, and scores the decisions.
package replay
