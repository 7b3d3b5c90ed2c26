// Package rollup keeps a long session's calls within what one entry may
// name as parents (lineage.MaxParents).
//
// A call justified by its session's whole context names every entry in it
// as a parent. Past At entries, the oldest are rolled up, Chunk at a time,
// into summary entries signed by the agent, each deriving from its chunk
// with strong edges; a call's justification is then the rollups and the
// rest of the context. Strong edges carry both labels, so the gate decides
// as it would on the whole context, and a trace reaches every root through
// the rollups. The Claude Code hook and the MCP gateway both use it: the
// hook remembers its rollups in a state file between events, the gateway
// in memory for its sessions' lives.
package rollup
