// Package policies holds pedigree's default Rego policies, embedded in the
// binary. Each policy package has its own folder, with x.rego beside
// x_test.rego; the Go test in this package compiles the bundle and runs the
// Rego tests, so `go test ./...` catches a broken policy.
package policies
