package policies

import "embed"

// FS holds the default policies (tests included: the gate leaves out files
// that end in _test.rego).
//
//go:embed gate/*.rego
var FS embed.FS
