// Package hatch reaches behind an engine's facade, for pedigree's own tests,
// benchmarks and crash harness: what it returns bypasses the engine's checks
// (a row written through the graph is not logged, a registry changed here is
// not sealed). The root package fills it in when it is initialised; it is
// internal so that nothing outside this module can reach it, and each
// function takes the *pedigree.Engine as any because the root package imports
// this one.
package hatch

import (
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

var (
	// Registry is the principal registry behind an engine.
	Registry func(engine any) *registry.Registry
	// Graph is the lineage graph behind an engine.
	Graph func(engine any) *lineage.Graph
	// Gate is the gate behind an engine.
	Gate func(engine any) *gate.Gate
	// Log is the Merkle log behind an engine.
	Log func(engine any) *tlog.Log
	// Abandon closes an engine as a killed process would leave it, without
	// the checkpoint it hands its witnesses at close (crash tests).
	Abandon func(engine any) error
)
