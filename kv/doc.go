// Package kv is the storage contract pedigree's owners of stored facts are
// written against: the registry, the lineage graph, the Merkle log and the
// decision log each keep their rows through it, and never see a key-value
// engine. internal/store implements it twice: on Badger, for a data
// directory, and on a copy-on-write B-tree in memory, for NewInMemory,
// replays and tests. One conformance suite (kv/kvtest) states
// the contract as tests and runs against both (and against Badger's own
// in-memory mode).
//
// Each owner is handed a Store (or, inside a transaction the engine
// assembles, a Txn) scoped to its own namespace: keys are relative to it, so
// an owner cannot read or write another owner's rows. The table of
// namespaces, their owners and how each row is authenticated is in
// internal/store's package documentation.
package kv
