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
