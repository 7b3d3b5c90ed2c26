// Package pedigree keeps LLM agents from acting on poisoned memory. This
// package is the engine facade: one value, an *Engine, opens a data
// directory and wires the registry, the lineage graph, the gate and the
// trajectory detector together, so that an agent harness records, recalls,
// checks, approves, traces and verifies through it. The same verbs reach a
// running sidecar server through the server package's client; both are a
// Backend.
//
// # The idea
//
// pedigree does not read content to decide. Every entry (a prompt, a tool's
// output, a memory, a summary, a proposed call) is a statement signed by the
// principal that wrote it, and names the entries it was derived from, with
// an attribution weight each. Each entry carries two labels fixed at insert,
// from its parents alone: the effective tier, the least trusted of its own
// tier and its strong parents' effective tiers (an edge is strong at or
// above τ), and the reach tier, the same over every parent. Before a
// sensitive tool call, the gate asks of the call's justification whether
// any of it descends from content an untrusted party wrote: if so it denies
// (or asks a human, when the untrusted ancestor is reached only through
// weak edges, or only the control of the call is tainted), with the path
// back to the untrusted ancestor.
//
// # The lifecycle
//
//  1. Init creates a data directory with τ and an operator key, which only
//     signs the registry freeze and log checkpoints: WithOperatorKeyFile
//     writes a new one outside the directory, with its public half (the
//     trust root) beside it; WithOperatorSigner takes one the caller holds.
//     Init also makes the engine key, which signs every leaf the engine
//     logs and the checkpoints it hands its witnesses, and registers it as
//     EnginePrincipal (WithEngineKeyFile: outside the directory, like the
//     operator key; it stays on the host). Open opens the directory again,
//     with its engine key, pinned to the trust root with WithTrustRoot,
//     with witnesses (WithWitnessFile); NewInMemory makes a throwaway
//     engine for tests and replays.
//  2. AddPrincipal registers every principal with its tier (Internal, User,
//     Unverified, External, most trusted first) and public key: the user,
//     the agent, every tool whose output the agent reads. Approver marks
//     the user-tier principals who may approve a denied call.
//  3. Freeze signs the registry with the operator key. From then on no
//     principal can be added, removed or changed, after restarts too, and
//     entries can be recorded. Keep the operator key off the host.
//  4. Record signs an entry with its principal's key (Insert takes one
//     signed elsewhere: the harness may keep every private key). An entry
//     in a session without explicit Parents derives from the whole session
//     context with strong edges, unless a user wrote it.
//  5. Recall puts stored memories into a session's context: what the agent
//     writes or calls there next derives from them.
//  6. Check signs and records a proposed call and decides on it: allow,
//     deny or ask. Its CallID is the parent the tool's output names when it
//     is recorded. Any error from Check means the call must not run.
//  7. Approve lets an approver allow one denied call, once, bound to its
//     session, tool and exact arguments, with an expiry.
//  8. Trace explains a label: every untrusted root and the path to it.
//  9. Verify checks every signature, ID, edge and label, the registry
//     freeze and the Merkle log with the engine's signature of each leaf,
//     against the witnesses' checkpoints too; Checkpoint signs the log's
//     head with the operator key, to keep elsewhere.
//
// # What the harness must report honestly
//
// pedigree believes the harness about what the agent saw; signatures stop
// forgery, not omission. So the harness must:
//
//   - record every input the agent reads (prompts, tool outputs, retrieved
//     documents, memories) as it arrives, signed as its real principal: a
//     tool's output as the tool, never as the agent or the user;
//   - record each tool's output with the call that produced it as a parent
//     (Entry.Parents = the decision's CallID): a call's parents are its
//     justification, so a trusted tool that echoes untrusted input stays
//     tainted;
//   - leave Entry.Parents and Call.Justification nil unless it knows better:
//     nil means the whole session context, and an explicit list is the
//     harness vouching for it (an empty Justification is refused);
//   - give ArgSources when it knows where an argument's value came from,
//     so that untrusted free text in a harmless argument does not block the
//     call, while a recipient that came from an email still denies;
//   - Recall a stored memory into the session that uses it;
//   - run a call only on an allow, and treat every error as a deny.
//
// Attribution weights below τ are the harness's to give and only make the
// gate ask; dilution below τ is a known laundering channel.
//
// # How taint crosses sessions
//
// A session's context is every entry recorded in it or recalled into it.
// A memory written in one session from an email is external (its effective
// tier is the email's); recalled into another session days later, it joins
// that context, so what the agent writes or calls there derives from it and
// is external too, and the gate denies a payment that rests on it. Calls
// and approvals do not join the context: a call is what the agent did, and
// its result comes back as a tool output, which does.
//
// # The engine's face
//
// The verbs a harness calls every turn (record, recall, check, approve,
// show, trace, verify) are methods of Engine. What an operator or a remote
// signer does now and then is behind four small views, so that Engine reads
// in one screen: its log's proofs and checkpoints (Engine.Log), its place in
// a fleet (Engine.Fleet), the registry before freeze (Engine.Bootstrap), and
// statements signed by a caller that holds its own key (Engine.Envelopes). A
// view holds nothing of its own; it is valid as long as its engine is open.
// The role interfaces (Recorder, Checker, Reviewer, Auditor, Prover; Harness
// and Backend made of them) are what an adapter asks for, satisfied by the
// engine and by the sidecar server's client alike.
//
// The files are laid in layers, each using only the files below it (but
// for four calls, named in docs/design.md): at the bottom errors.go,
// options.go, record.go (what a write is) and engine.go (the Engine, the
// state it holds, and the committer seam between a local engine and a fleet
// node); over them the rules a statement follows (grant.go,
// justification.go, statement.go, plan.go); then commit.go (the one commit
// every write is: commit, apply and each kind's writer), the verbs
// (review.go, append.go, check.go, read.go, bootstrap.go, envelopes.go) and
// the log's keys, proofs and witnesses (enginekey.go, proofs.go,
// witness.go); at the top verify.go, open.go (make, open, close, seal
// again) and fleet.go.
//
// Nothing in this package exits, panics on bad input or reads the
// environment; every call that does I/O takes a context.
package pedigree
