package pedigree

import (
	"context"
	"crypto/ed25519"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// Engine is an open data directory. It is the one assembler of the parts:
// each owner of stored facts (the registry, the lineage graph, the Merkle
// log, the decision log) keeps its own namespace of the store, and the
// engine composes their writes into the one transaction that a verb needs
// (a check stores its call entry, logs it and its decision, and records the
// trajectory step and the approval's use in one durable commit). The gate
// is a pure evaluator over facts the engine reads.
type Engine struct {
	db        *store.DB
	reg       *registry.Registry
	graph     *lineage.Graph
	log       *tlog.Log
	decisions *decisionlog.Log
	gate      *gate.Gate
	cfg       config
	dir       string
	fleet     *fleetLink // nil: a local engine
	committer committer  // where a record becomes durable: localCommitter, or fleet
	// refusals counts the refusals logged since open (refusal.go).
	refusals atomic.Uint64
	// engine signs every leaf the engine logs (enginekey.go); nil, with
	// engineErr saying why, when the engine cannot write.
	engine        *registry.Signer
	engineID      string // its principal (engine:local, engine:<node> in a fleet)
	engineErr     error
	verifiersOnce sync.Once
	verifiers     []*registry.Verifier
	engineKeyByID map[string]ed25519.PublicKey
	// The witnesses' state (witness.go).
	witnessMu     sync.Mutex
	witnessedSize uint64
	pending       int
	lastWitness   time.Time
	witnessErr    error      // guarded by witnessErrMu too: read at every leaf
	witnessErrMu  sync.Mutex // never held across I/O
	stopWitness   chan struct{}
	witnessDone   chan struct{}
}

// Close finishes the writes in flight and closes the store (a fleet node
// first stops applying the stream and leaves it).
func (e *Engine) Close() error {
	e.committer.close()
	if e.stopWitness != nil {
		close(e.stopWitness)
		<-e.witnessDone
		if err := e.witness(context.Background()); err != nil {
			e.cfg.log.Warn("the log could not be witnessed at close", "error", err)
		}
	}
	return e.db.Close()
}

// Dir is the data directory ("" in memory).
func (e *Engine) Dir() string { return e.dir }

// The hatches around the facade, for pedigree's own tests (internal/hatch).
func init() {
	hatch.Registry = func(e any) *registry.Registry { return e.(*Engine).reg }
	hatch.Graph = func(e any) *lineage.Graph { return e.(*Engine).graph }
	hatch.Gate = func(e any) *gate.Gate { return e.(*Engine).gate }
	hatch.Log = func(e any) *tlog.Log { return e.(*Engine).log }
	hatch.Abandon = func(e any) error { return e.(*Engine).abandon() }
}
