// Package hatch reaches behind an engine's facade, for pedigree's own tests,
// benchmarks and crash harness: what it returns bypasses the engine's checks
// (a row written through the graph is not logged, a registry changed here is
// not sealed). The root package fills it in when it is initialised; it is
// internal so that nothing outside this module can reach it, and each
// function takes the *pedigree.Engine as any because the root package imports
// this one.
package hatch
