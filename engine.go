package pedigree

import (
	"context"
	"crypto/ed25519"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/fleet"
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

// Dir is the data directory ("" in memory).
func (e *Engine) Dir() string { return e.dir }

// committer is where a record becomes durable, the one seam between a local
// engine and a fleet node: the store's group commit (localCommitter), or the
// fleet's stream (fleetLink, fleet.go). The verbs never ask which they have.
type committer interface {
	// commit makes r durable, and applied here before it returns.
	commit(ctx context.Context, r *record) error
	// catchUp waits, bounded, until this engine has applied what was
	// committed elsewhere before it was called. false: nothing can have
	// been (a local engine).
	catchUp(ctx context.Context) (bool, error)
	// close stops committing (a fleet node leaves the stream).
	close()
}

// fleetLink is a fleet node's engine and its link to the stream.
type fleetLink struct {
	e *Engine
	n *fleet.Node
	// mine are the records this node is publishing, by the SHA-256 of
	// their bytes on the wire: its applier takes their signature as made
	// (the same bytes for the same subject verify the same way).
	mine sync.Map // [32]byte → ownRecord
	fleetChainState
}

type ownRecord struct {
	kind fleet.Kind
	key  string
	rec  []byte
}

// fleetChainState is the part of fleetLink that binds records to their
// place.
type fleetChainState struct {
	genesis     fleet.Chain
	witnessFile string

	wmu    sync.Mutex
	wSeq   uint64
	wChain fleet.Chain
	wAt    uint64 // the witnessed checkpoint record's place (0: unknown)
	wRec   []byte // its bytes

	cpmu    sync.Mutex // one checkpoint at a time
	cmu     sync.Mutex
	count   int    // records published since the last checkpoint was due
	lastCP  uint64 // the sequence this node last checkpointed
	loopCtx context.Context
}

// witnessRefusal is why nothing may be logged: the store is not an
// extension of what its witnesses hold (nil when it is).
func (e *Engine) witnessRefusal() error {
	e.witnessErrMu.Lock()
	defer e.witnessErrMu.Unlock()
	return e.witnessErr
}
