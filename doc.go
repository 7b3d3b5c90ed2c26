// Package pedigree is the engine facade: it opens a data directory and
// wires the registry, the lineage graph, the gate and the trajectory
// detector together, so that an agent harness can record, recall, check,
// approve, trace and verify through one value.
//
// pedigree keeps LLM agents from acting on poisoned memory. It does not read
// content to decide: every entry is bound to the principal that signed it,
// records what it was derived from, and carries two labels fixed at insert,
// the effective tier (the least trusted of its own tier and its strong
// parents' effective tiers) and the reach tier (the same over every parent).
// Before a sensitive tool call, the gate asks of the call's justification
// whether any of it descends from content an untrusted party wrote.
//
// Nothing in this package exits, panics on bad input or reads the
// environment; every call that does I/O takes a context.
package pedigree
