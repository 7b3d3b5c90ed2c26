// Package rollup keeps what a long session's entries list as parents
// within what one entry may name (lineage.MaxParents).
//
// A call justified by its session's whole context names it by reference
// when its backend can (pedigree.ContextReferrer: the engine, a server's
// client), and needs no rollup. An entry derived from the context (the
// hook's result with no recorded call), or a call through a backend that
// cannot name a reference, names every entry in it as a parent. Past At
// entries, the oldest are rolled up, Chunk at a time, into summary entries
// signed by the agent, each deriving from its chunk with strong edges; the
// entry's parents (a call's justification) are then the rollups and the
// rest of the context. Strong edges carry both labels, so the gate decides
// as it would on the whole context, and a trace reaches every root through
// the rollups. The Claude Code hook and the MCP gateway both use it: the
// hook remembers its rollups in a state file between events, the gateway
// in memory for its sessions' lives.
package rollup
