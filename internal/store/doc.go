// Package store is pedigree's one door to its key-value engines. It
// implements the kv contract (package kv) that every owner of stored facts
// is written against, gives each owner its own namespace, and runs the one
// write path: a group committer that batches the writes waiting at the
// same moment into one transaction and one fsync. The engines, their memory
// profile, their durability settings and their error vocabulary live here
// and nowhere else.
//
// # Two engines, one contract
//
// A data directory is Badger (badger.go). An in-memory store
// (Options.InMemory: NewInMemory, replays, tests) is a B-tree
// (memory.go, github.com/google/btree): a read transaction works on a
// copy-on-write clone, a read-write one buffers its writes, reads them
// back merged with the snapshot in key order, and applies them at commit
// under a lock; the committer already makes writes one at a time, so it
// never conflicts. Both answer with the same errors (kv.ErrNotFound,
// kv.ErrStop; a write in a read transaction fails). The memory engine has
// no transaction size limit (Badger's ErrTxnTooBig) and no free-space
// check: the committer's batch bounds are the only limits there. Both
// engines, and Badger's own in-memory mode, run the conformance suite in
// kvtest (conformance_test.go), so they cannot drift apart unseen.
//
// # Namespaces
//
// Every key belongs to exactly one owner, declared once in space.go. An
// owner is handed its namespace (a Space, or a transaction seen through
// Txn.In) and its keys are relative to it, so no package can read or write
// another's rows. The engine (the root package) is the only code that holds
// the whole key space: it composes the owners' writes into the one commit a
// verb needs.
//
// # Every row, and what vouches for it
//
// "signed" rows carry a principal's or the operator's signature; "derived"
// rows are recomputed from signed rows by `pedigree verify` (and the ones a
// check relies on are re-checked at use where noted); "logged" rows are
// leaves of the Merkle log (or hashed into one) whose root the operator's
// checkpoints sign; a row named "hint" is never evidence by itself.
//
//	namespace  row                         owner                what vouches for it
//	meta/      schema                      store                refused at open when it is not this build's
//	reg/       meta (τ, cap, operator key) registry             τ and the approval cap: the signed freeze
//	                                                            manifest, checked at open; operator key: the
//	                                                            manifest names its fingerprint, but only a trust
//	                                                            root pinned outside the directory (WithTrustRoot)
//	                                                            anchors it: without one a writer of the directory
//	                                                            can replace it and re-freeze, and verify says
//	                                                            that no root is pinned
//	reg/       p/<principal>               registry             the signed freeze manifest, checked at open; a
//	                                                            public key held by two principals (or the
//	                                                            operator's by one) is refused at open
//	reg/       freeze                      registry             signed by the operator key; a copy is kept
//	                                                            beside the store (registry.freeze)
//	lin/       e/<id>                      lineage              signed by the entry's principal; the ID is the
//	                                                            hash of the signed bytes
//	lin/       n/<id>                      lineage              derived: labels, parents and fields recomputed
//	                                                            from the signed statement and the parents' rows
//	lin/       c/<id>                      lineage              derived: must hash to the signed content digest
//	lin/       q/<seq>                     lineage              logged: seq is the entry's log leaf index + 1
//	lin/       s/<session>\x00<n>           lineage              derived: every session's context is re-derived
//	lin/       m/<session>\x00<id>          lineage              from the entries' signed sessions and the recall
//	                                                            records, both ways
//	lin/       r/<recall id>               lineage              logged: a leaf names it; it hashes to its ID
//	lin/       cd/<digest>\x00<id>          lineage              derived: re-derived from the memory entries' signed
//	                                                            content digests, both ways (the MCP gateway's
//	                                                            look-up from a memory server's answer)
//	lin/       pc/<plan>\x00<step><id>      lineage              derived: re-derived from the calls' signed plan
//	                                                            citations, both ways (whether a delegated plan
//	                                                            step was carried out before)
//	l/         leaf/<index>                tlog                 logged: the leaves; their root at each
//	                                                            checkpoint's size must match its signed root
//	l/         n/<level><index>            tlog                 derived: every subtree hash is recomputed
//	l/         i/<kind><id>, state         tlog                 derived: recomputed from the leaves
//	l/         cp/<size>                   tlog                 signed by the operator key
//	l/         a/<index>                   tlog                 signed by the engine key (certified in the frozen
//	                                                            registry as engine:local): the leaf's index, kind
//	                                                            and ID, so a leaf dropped, added, moved or
//	                                                            rewritten before the last is named; the log's
//	                                                            tail is held by the engine's witnesses
//	dec/       g/<decision id>             decisionlog          logged: the record hashes to its ID, a leaf
//	dec/       gi/<decision id>            decisionlog          derived: hashes to the record's input digest
//	dec/       gq/<seq>                    decisionlog          logged: seq is the decision's leaf index + 1
//	dec/       au/<approval id>            decisionlog          hint that can only deny: a check rules out a use
//	                                                            from the log's own leaves after the approval's
//	                                                            (every leaf there, each decision hashing to its
//	                                                            ID, none naming it), so deleting this row, or any
//	                                                            row that scan reads, costs the approval and never
//	                                                            buys a second use; verify checks both ways
//	dec/       a/<session>\x00<action>\x00<id>  decisionlog     hint: a check reads the signed approval entry
//	                                                            and the logged decision it names, never this row
//	dec/       ad/<decision id>            decisionlog          hint: one decision, one approval, refused at
//	                                                            write; deleting it lets the approver approve
//	                                                            again, which still needs the approver's key
//	dec/       gr/<decision id>            decisionlog          hint, checked: who approved or rejected the
//	                                                            decision; every read and verify checks it
//	                                                            against the signed entry it names, and verify
//	                                                            that every rejection entry has its row
//	dec/       t/<session>, tc/…, ta/…     decisionlog          derived: the session's trajectory features,
//	                                                            calls and alerts; verify replays every step in
//	                                                            log order (a decision's step is sealed in its
//	                                                            record, a recall appends one) and names each
//	                                                            row that differs, is missing or is extra; model
//	                                                            alerts with the model the engine loads. A check
//	                                                            reads only t/, and refuses it at use (fails
//	                                                            closed) unless its counts add up to its length,
//	                                                            and that length and its last role are its last
//	                                                            tc/ row's: a cheap check of the head, not a
//	                                                            replay; rows rewritten to agree are verify's
//	rf/        <seq>, next                 engine (refusal.go)  nothing, by design: evidence of refused writes
//	                                                            for the operator (claimed principal, reason,
//	                                                            payload digest); bounded; no decision reads it
//	flt/       applied                     the engine (fleet)   hint: a fleet node's place in the stream; the
//	                                                            stream is the record, and a node whose rows are
//	                                                            in doubt is rebuilt from it
//
// A row of any namespace that this table does not name is reported by
// verify where its owner iterates its namespace (lineage and the log do).
//
// Beside the store, in the data directory, the files that change decisions
// are vouched for the same way: registry.freeze is the freeze record's copy
// (compared at open; a missing one is named by verify); tools.yaml (which
// calls are gated), trajectory-model.json (which raise alerts),
// mcp/upstreams.json and claude-hook.yaml (the gateway's upstreams and the
// hook's mapping: ReadSealed) count,
// after freeze, only as config.seal says: the operator key's signature over
// the freeze record's digest and each file's sha256, checked at open (the
// engine parses the bytes it checked) and again by verify (the root
// package's seal.go).
package store
