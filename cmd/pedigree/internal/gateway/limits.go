package gateway

import "time"

const (
	// AskTimeout bounds how long the gateway waits for the human.
	AskTimeout = 5 * time.Minute
	// ApprovalTTL is the life of an approval given through elicitation: it
	// is used at once, by the check that follows it.
	ApprovalTTL = 2 * time.Minute
	// RequestStateTTL bounds how long a 2026-07-28 input request may take.
	RequestStateTTL = 10 * time.Minute
	// MaxMemoryItems bounds the memory items one call may write or read:
	// each becomes an entry or a parent.
	MaxMemoryItems = 1000
	// MaxResultBytes bounds an upstream result the gateway records.
	MaxResultBytes = 16 << 20
	// MaxMessageBytes bounds one JSON-RPC message on stdio.
	MaxMessageBytes = 4 << 20
	// MetaDecision is the _meta key of the gateway's decision on a result.
	// An upstream's own value under this key (or any io.pedigree/ key) is
	// removed: only the gateway speaks for pedigree.
	MetaDecision = "io.pedigree/decision"
	metaPrefix   = "io.pedigree/"
	// reservedPrefix is the MCP protocol's own _meta namespace.
	reservedPrefix = "io.modelcontextprotocol/"
)
