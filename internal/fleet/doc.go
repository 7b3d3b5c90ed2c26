// Package fleet shares one lineage graph among many pedigree nodes on NATS
// JetStream. It is the transport; the engine (the root package) says what
// a record is and how it is applied. It is the only package that imports
// NATS.
//
// # The stream is the system of record
//
// Every write of a fleet node (an entry, a decision, an approval, a
// recall) is a record that the node publishes to one replicated stream
// (default "PEDIGREE", subjects "pedigree.<kind>.<key>") instead of
// committing it to its store. Every node runs an applier that reads the
// stream in order and hands each record to the engine, which verifies it
// again and applies it to the node's local Badger in one commit with the
// record's stream sequence (flt/applied). The same records in the same
// order give every node the same graph, decision log and Merkle log (their
// log heads are equal once they have applied the same prefix). A node's
// directory is a materialised view: delete it, start the node on an empty
// directory, and it is rebuilt from the stream.
//
// A node reads its own writes: Publish returns once this node's applier has
// applied the record (or refused it), within Config.Wait. A check that
// names an entry the node has not applied waits, bounded, until the node has
// applied everything the stream held when it asked (Barrier), then denies
// the entry as unknown, saying which (the decision's reasons).
//
// # Records and subjects
//
//	pedigree.genesis.registry   the frozen registry: the stream's first record (sequence 1)
//	pedigree.entry.<id>         a signed entry: envelope and optional content; id is its content hash
//	pedigree.approval.<id>      a signed approval entry
//	pedigree.rejection.<id>     a signed rejection entry
//	pedigree.decision.<id>      a sealed decision (with its input, trajectory step, call entry)
//	pedigree.use.<approval id>  a decision that used that approval
//	pedigree.recall.<id>        a recall record
//
// Every publish carries a message ID ("<kind>:<id>"), so a publish retried
// through a leader election is stored once within the stream's 10-minute
// de-duplication window; beyond it a copy is harmless, because applying an
// entry that is stored already does nothing. A parent is in the stream
// before any child: a node prepares an entry only against parents it has
// applied, which are earlier in the stream; an applier that meets a child
// whose parent it has not applied refuses it.
//
// # Single use stays single use
//
// The decision that uses approval X is published on pedigree.use.X, and
// every node applies the first use of X in the stream and refuses any
// later one: one decision per approval, whatever the number of nodes
// racing, decided by the stream's order, which every node shares. The
// loser's publish comes back refused once the loser has applied the
// winner's use; its check decides again without the approval. (The use
// is not a compare-and-set on its subject: a writer with publish rights
// could keep the subject taken with junk no node applies.) A node that
// cannot reach the stream cannot publish, so it never uses an approval it
// cannot record.
//
// # The genesis and the trust root
//
// A stream starts empty. The first node served on a frozen directory with
// no entries seeds it with its registry's genesis (registry.Genesis: τ, the
// operator key, every principal's key, the operator-signed freeze record).
// Every node checks the genesis against the operator key it pins (given
// outside any directory) before it applies anything: a node on an empty
// directory installs its registry from the genesis; a node with a registry
// refuses a stream whose genesis differs from it.
//
// # What a record must pass on every node
//
// The stream is reachable by whoever the NATS servers let publish, so no
// record is trusted because it is on the stream. Entries and approvals are
// verified against the frozen registry like any envelope from outside (the
// signature, the ID, the parents, content against its digest); an approval
// must name a logged decision that was not allowed, of the same session and
// action, and be signed by a user-tier principal. A decision must hash to
// its ID, its input to the digest it holds, its call entry must verify and
// be the call it decided on, and an approval it uses must be applied. A
// record that fails is refused: it is not applied, the node stores its
// place past it, logs it, counts it (pedigree_fleet_refused_records_total)
// and lists it (Refusals).
//
// # Every record is signed by the node that published it
//
// Before anything else, a record must carry a DSSE signature by a node's
// engine key over the record's kind, subject key and bytes (the engine's
// fleetsig.go has the format). Each node has an engine key of its own,
// certified as a principal engine:<node> (tier external) of the frozen
// registry, so every node knows every other node's key from the genesis;
// a node whose key the registry does not certify is not let in. A record
// that is unsigned, signed by any other key, signed for another subject or
// for other bytes is refused. So a writer with publish rights but no node's
// engine key can neither log a decision no gate made nor burn an approval.
// It can still copy a node's signed record onto its own subject again
// (an entry is stored once; a decision logged already, or a second use, is
// refused), and put junk on an approval's
// use subject, which every node refuses: junk costs the nodes the time to
// refuse it, not the approval. Give publish rights on the stream's
// subjects to the nodes only.
//
// # Durability: exactly what is promised
//
// The stream is a file store with 3 replicas (Config.Replicas). An
// acknowledged publish is stored by a quorum (2 of 3) of the stream's
// replicas. The servers must run with `jetstream { sync_interval: always }`
// (StartServer sets it: server.Options.SyncAlways): each replica then
// fsyncs a record before it counts towards the quorum. So an acknowledged
// record survives the loss of one server (its disk included) and a crash or
// power loss of all three. With the servers' default (an fsync every two
// minutes) an acknowledged record can be lost when a majority of servers
// crash within that window: pedigree does not check the servers' setting.
// A node's local store is derived: a node that crashes loses at most the
// records it had applied but not made durable, and applies them again from
// the stream, from the sequence its store holds.
//
// # A rewritten stream
//
// A record's signature binds its node, subject and bytes, not its place:
// whoever may delete the stream could make it again with the genuine
// records it chooses. Every node folds each record into a running hash
// (Chain) and publishes signed checkpoints of it (Kind Checkpoint); a node
// whose chain disagrees with a checkpoint, or whose stream holds fewer
// records than it applied, stops its applier for good (ErrRewritten,
// Status.Halted, not Ready). The engine's fleetchain.go signs and checks
// the checkpoints and holds the stream to a witness outside the node's
// directory, which catches a stream cut before its end.
//
// # Not replicated
//
// Checkpoints (pedigree log checkpoint) are per node: every node has the
// same log, so the operator signs any one node's head; the registry cannot
// change after the genesis.
package fleet
