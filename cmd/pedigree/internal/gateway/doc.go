// Package gateway is pedigree's MCP gateway: one MCP server in front of every
// MCP server a host uses, which records provenance for the agent and gates
// its sensitive calls.
//
// The MCP session is the pedigree session. Each tools/call is a call entry
// signed by the gateway's agent principal and justified by the session's
// context (the engine's Check records it and decides); each result is a
// tool_output entry signed by the upstream's tool principal with the call as
// its strong parent, so it joins the context and what the agent does next
// derives from it. Taint therefore crosses servers within a session: a file
// read from one server reaches a write to another. The output entry is
// signed before the result goes back and committed while it does; the
// session's next request waits until it is stored, and one that cannot be
// stored refuses the rest of the session. A call the catalog says is not
// sensitive, allowed without an approval, is forwarded while its call entry
// and decision are committed (Engine.CheckEarly); its result waits for that
// commit and is withheld if it fails. Any other call is forwarded only once
// its decision is stored.
//
// Nothing an upstream sends reaches the host unrecorded (mediate.go): every
// message on its way to the host passes admit, which records what it
// carries as an entry of the upstream's tool principal in the session, or
// refuses it. That is a tool's result and its JSON-RPC error (errors are
// content), a resource's contents, a prompt's messages, a completion's
// values and the errors of each, a progress message, and every listed tool,
// prompt, resource and template the operator's seal does not vouch for. An
// upstream's instructions, log messages and elicitation and sampling
// requests have no way to the host.
//
// What 'mcp add' read of a server (its tools' names, titles, descriptions,
// schemas and annotations; its prompts, resources and templates) is kept in
// upstreams.json, which the operator's seal covers: listing it records
// nothing (listing.go). What a server offers that differs from it (a rug
// pull, a list_changed, a new tool) is recorded as the server's content in
// every session from its start, and again when a session lists it after a
// change, and Options.Drift is told (for 'mcp list').
//
// Memory servers are followed across sessions: a write to the reference
// memory server is recorded as one memory entry per item (an entity with its
// type, an observation with its entity's name, a relation with both ends),
// and a read's answer is matched back to those entries by content digest,
// so the tool_output of the read descends from whatever the memory was
// written from. Content with no known writer, an observation moved to
// another entity among them, is recorded as an entry of the unverified tier.
//
// A denied call never reaches its upstream; the agent gets an error result
// that says why, with the decision under _meta["io.pedigree/decision"]. An
// ask asks the human through the host (elicitation) and, on accept, records
// a single-use approval signed by the approver key the gateway holds, then
// checks the call again and forwards it once. Everything that cannot be
// decided, recorded or asked is refused: the gateway fails closed.
//
// The gateway cannot see the user's prompt. Each session starts with an entry
// signed by the agent principal that stands for the host's side of the
// session; what the session reads through the gateway is what taints it.
package gateway
