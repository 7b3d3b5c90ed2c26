package pedigree

import (
	"fmt"
)

// Files in the data directory besides the store. The operator key is not
// among them: Init writes it where WithOperatorKeyFile says.
const (
	FreezeFile = "registry.freeze"
	ToolsFile  = "tools.yaml"
	ModelFile  = "trajectory-model.json"
)

// DefaultTau is the strong-edge threshold unless init is told otherwise.
const DefaultTau = 0.5

// ErrNoOperatorKey: Init was told neither where to write the operator key
// nor which one to use.
var ErrNoOperatorKey = fmt.Errorf("%w: Init needs WithOperatorKeyFile or WithOperatorSigner", ErrOptions)

// dataFiles are the names pedigree keeps in a data directory beside the
// store (the server's serve.json and serve.token included).
var dataFiles = []string{FreezeFile, SealFile, ToolsFile, ModelFile, MCPConfigFile, HookMappingFile, "serve.json", "serve.token", "pedigree.sock", "mcp", "hook-state", "hook-keys"}

// The configuration the data directory holds changes decisions as surely as
// its rows do: a tool the catalog marks `sensitive: false` is never gated,
// the trajectory model decides which calls raise alerts, the gateway's
// upstreams say which command runs as which principal, and the hook's
// mapping which principal signs each tool's output. A writer of the
// directory must not be able to change them, so after freeze they count
// only under the operator's seal: SealFile beside the store, a DSSE
// envelope signed by the operator key over the freeze record's digest and
// the sha256 of each sealed file (or its absence). Freeze writes it; Seal
// writes it again after the operator changes a file. A frozen store whose
// sealed files differ from the seal, or that has no seal, is refused at
// open (ConfigSealError), and readers that may go through a server check
// their file themselves (ReadSealed). Files given explicitly
// (WithToolsFiles, WithPolicyDir, WithModel) are the caller's, and are not
// sealed.
const SealFile = "config.seal"

// Files the MCP gateway and the Claude Code hook read from the data
// directory: which upstream command runs under which principal, and which
// principal signs each Claude Code tool's output. Sealed too.
const (
	MCPConfigFile   = "mcp/upstreams.json"
	HookMappingFile = "claude-hook.yaml"
)
