package hook

// Limits on what one event may carry.
const (
	// MaxEventBytes bounds one event. Claude Code truncates tool output far
	// below this (Bash output to about 30,000 characters, MCP output to
	// 25,000 tokens); a larger event is refused, never cut.
	MaxEventBytes = 16 << 20
	// MaxStoredContent bounds the content kept beside an entry's digest so
	// that a trace can show it; larger content keeps its digest only.
	MaxStoredContent = 64 << 10
	// MaxArgsBytes is the size of tool arguments past which long string
	// values are replaced by their digests (a Write of a large file). The
	// call still binds the exact arguments through those digests.
	MaxArgsBytes = 32 << 10
	// maxArgString is the longest string argument kept as is when the
	// arguments are over MaxArgsBytes.
	maxArgString = 1 << 10
	// MaxToolUseID bounds a tool_use_id.
	MaxToolUseID = 256
	// maxMentions bounds the @-mentions of one prompt that are recorded.
	maxMentions = 64
	// maxReasonSources is how many untrusted sources a reason names.
	maxReasonSources = 3
	// maxMemoryItems bounds the items of one MCP memory write.
	maxMemoryItems = 256
)
