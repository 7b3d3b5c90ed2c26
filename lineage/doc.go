// Package lineage is the derivation graph: signed entries, their parents,
// the labels that carry taint, the walks that explain it, and the
// tamper-evident log.
//
// An entry is an immutable statement signed by its principal (a DSSE
// envelope). Its ID is the sha256 of the signed bytes, and the signature
// covers its parents and their attribution weights, so a parent must exist
// before a child names it: the graph is acyclic by construction, and
// rewriting an ancestor changes every descendant's ID.
//
// Each entry gets two labels at insert, from its parents alone, so the cost
// does not grow with the graph: the effective tier (the least trusted of
// its own tier and the effective tiers of its strong parents, weight ≥ τ)
// and the reach tier (the same over every parent). With each label the node
// keeps the parent that set it and the untrusted root at the end of that
// chain, so the gate can show a path on every check by following the chain
// (Witnesses) instead of walking the ancestry; Trace walks the ancestry,
// bounded, in one read transaction, to list every untrusted root. A node row
// carries its signed parents, so each step of a walk is one read (most often
// a cache hit) and an insert writes no edge keys.
//
// The graph keeps its rows in its own namespace of the store, through the
// kv contract (see package kv). It reads through it, but writes only inside a
// transaction the engine assembles (Pending.Write, RecordRecall): whatever
// it stores is logged in the same commit, and the log (package tlog) is not
// the graph's. VerifyIn checks signatures, IDs, node rows, labels and
// re-derives every session's context from the entries' signed sessions and
// the recall records; the engine checks the result against the log, and,
// with the recall records' positions in it, each context's order
// (VerifyContextOrder): a context's rows and head are not signed, so a
// swap with the head rewritten to match is found there.
//
// Public, and meant for outside use: a harness builds and signs statements
// here (Statement, SignStatement, Sign, Open), and reads nodes, edges,
// sources and traces returned by the engine.
package lineage
