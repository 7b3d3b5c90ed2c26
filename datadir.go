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
