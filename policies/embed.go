// Package policies holds pedigree's default Rego policies, embedded in the
// binary. Each policy package has its own folder, with x.rego beside
// x_test.rego; the Go test in this package compiles the bundle and runs the
// Rego tests, so `go test ./...` catches a broken policy.
package policies

import "embed"

// FS holds the default policies (tests included: the gate leaves out files
// that end in _test.rego).
//
//go:embed gate/*.rego
var FS embed.FS
