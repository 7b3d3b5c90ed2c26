package lineage

// Limits on what one entry may carry and on what one read may walk. They
// bound the work an untrusted caller can ask of the engine.
const (
	// MaxParents is the most parents one entry may name.
	MaxParents = 1024
	// MaxContextRef is the most context entries a call may name by
	// reference (ContextRef).
	MaxContextRef = 1 << 24
	// MaxEnvelopeBytes bounds a signed envelope (statement and signature).
	MaxEnvelopeBytes = 256 << 10
	// MaxContentBytes bounds the optional content stored with an entry.
	MaxContentBytes = 1 << 20
	// MaxArgsBytes bounds a call's canonical arguments.
	MaxArgsBytes = 64 << 10
	// MaxSessionLen bounds a session name.
	MaxSessionLen = 256
	// MaxToolLen bounds a tool name.
	MaxToolLen = 128
	// DefaultTraceDepth and DefaultTraceNodes bound a trace unless the caller
	// asks for less; MaxTraceNodes is the ceiling whatever the caller asks.
	DefaultTraceDepth = 64
	DefaultTraceNodes = 10000
	MaxTraceNodes     = 100000
	// MaxWitnessPath bounds the path followed from an entry to the untrusted
	// root that set its label (see Graph.Witness).
	MaxWitnessPath = 4096
	// MaxPlanSteps bounds the steps of one plan.
	MaxPlanSteps = 256
	// MinPrefix is the shortest ID prefix accepted.
	MinPrefix = 8
)
