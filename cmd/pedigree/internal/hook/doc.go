// Package hook connects Claude Code's hooks to pedigree. Claude Code runs a
// hook before and after every tool use and when the user submits a prompt;
// each run carries one JSON event. The package turns those events into
// lineage: the prompt is the user's entry, every proposed call is a gate
// check by the agent's principal (its justification: the session's
// context), and every tool result is a tool_output entry signed by the
// tool's principal, derived from its call. The answer to a PreToolUse is
// Claude Code's own allow, deny or ask, with a reason a person can act on.
//
// The events do not carry everything the model is sent: files loaded by
// @-mentions, CLAUDE.md and memory files, the context hooks add, images,
// compaction summaries, and the whole earlier conversation of a forked or
// continued session reach it without a tool call. Claude Code's transcript
// (the events' transcript_path) holds them all: at each UserPromptSubmit
// and PreToolUse the hook reads what the transcript gained and records
// every item the session's context does not hold yet (transcript.go parses,
// sync.go says what is recorded as whom, and which source wins). Neither
// holds the MCP servers' tool descriptions, which Claude Code also sends:
// the hook reads the MCP configuration Claude Code resolves, and records
// every server not behind pedigree's gateway as unsealed external content
// (mcpseen.go).
//
// The same Handler serves the `pedigree hook claude` command (one event on
// stdin) and the sidecar's POST /v1/hooks/claude (Claude Code's http hooks).
// It works against a pedigree.Harness: the engine itself, or a client of a
// running server.
//
// Every failure is an error the caller must turn into a block: exit code 2
// for a command hook, a blocking JSON answer for an http hook. Claude Code
// lets a call through on any other failure, so nothing here may fail open.
package hook
