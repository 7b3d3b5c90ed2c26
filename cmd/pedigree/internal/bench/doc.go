// Package bench is the workload of `pedigree bench`: the same shape every
// time, so figures compare across versions and machines (see CLI.md).
package bench
