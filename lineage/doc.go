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
// Writes are group-committed: entries (and the gate's decisions) waiting at
// the same moment are written in one transaction and one fsync, and each
// caller is answered after it. Every entry and decision is appended to an
// RFC 6962 Merkle log in the transaction that stores it; Verify checks
// signatures, IDs, edges, labels, the log and its signed checkpoints.
package lineage
