// Package tlog is pedigree's tamper-evident log: an RFC 6962 Merkle tree
// over every entry, decision and recall, in append order, appended in the
// same transaction as what it logs. Every complete subtree's hash is stored,
// so an inclusion or consistency proof reads O(log n) nodes. Checkpoints
// (size and root) are signed by the operator key (the stored ones) or by
// an engine key (the ones the engine hands its witnesses); each leaf
// carries the engine's signed attestation of its index (SetAttestation).
// Verify recomputes the tree from the leaves and checks every stored hash
// and checkpoint.
//
// The log keeps its rows through the kv contract, in its own namespace; the
// engine hands Append the namespace's view of the transaction that stores
// what is logged. The proof and checkpoint types are public so that anyone
// holding a checkpoint can verify a proof without the store.
package tlog
