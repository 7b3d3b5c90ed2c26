package pedigree

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
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
	"github.com/pedigree-ai/pedigree/trajectory"
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

func open(ctx context.Context, db *store.DB, dir string, c config) (*Engine, error) {
	fail := func(err error) (*Engine, error) { db.Close(); return nil, err }
	reg, err := registry.Load(db.Space(store.Registry))
	if err != nil {
		return fail(err)
	}
	if err := c.trustRoot.check(reg); err != nil {
		return fail(err)
	}
	graph := lineage.New(db.Space(store.Lineage), reg, c.log)
	if err := checkFreezeAnchors(dir, reg, graph); err != nil {
		return fail(err)
	}
	tl, err := tlog.New(db.Space(store.Log), reg.OperatorKey())
	if err != nil {
		return fail(err)
	}
	files, err := readConfig(dir)
	if err != nil {
		return fail(err)
	}
	if !c.unsealed {
		if err := checkSeal(dir, reg, files, c.fleetNode); err != nil {
			return fail(err)
		}
	}
	if c.catalog == nil && len(c.toolsFiles) > 0 {
		if c.catalog, err = gate.LoadCatalogs(c.toolsFiles...); err != nil {
			return fail(err)
		}
	}
	if b, ok := files[ToolsFile]; c.catalog == nil && ok {
		if c.catalog, err = parseCatalog(filepath.Join(dir, ToolsFile), b); err != nil {
			return fail(err)
		}
	}
	if c.policy == nil && c.policyDir != "" {
		if c.policy, err = gate.PolicyFromDir(c.policyDir); err != nil {
			return fail(err)
		}
	}
	if c.policy == nil && c.replaceDir != "" {
		if c.policy, err = gate.ReplacementPolicyFromDir(c.replaceDir); err != nil {
			return fail(err)
		}
	}
	if b, ok := files[ModelFile]; c.model == nil && ok {
		if c.model, err = trajectory.ParseModel(filepath.Join(dir, ModelFile), b); err != nil {
			return fail(err)
		}
	}
	gopts := []gate.Option{gate.WithCatalog(c.catalog), gate.WithModel(c.model)}
	if c.policy != nil {
		gopts = append(gopts, gate.WithPolicy(c.policy))
	}
	if c.gateTimeout != 0 {
		gopts = append(gopts, gate.WithTimeout(c.gateTimeout))
	}
	g, err := gate.New(ctx, gopts...)
	if err != nil {
		return fail(err)
	}
	e := &Engine{db: db, reg: reg, graph: graph, log: tl, decisions: decisionlog.New(db.Space(store.Decisions), c.model),
		gate: g, cfg: c, dir: dir}
	e.loadEngineKey()
	if err := tl.SetEngineKeys(e.engineKeyList()); err != nil {
		return fail(err)
	}
	e.checkWitnesses()
	e.witnessLoop()
	return e, nil
}

// parseCatalog reads the data directory's catalog from the bytes the seal
// was checked against, as LoadCatalogs would read the file.
func parseCatalog(path string, b []byte) (*gate.Catalog, error) {
	c, err := gate.ParseCatalog(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return gate.MergeCatalogs(c)
}

// Close finishes the writes in flight and closes the store (a fleet node
// first stops applying the stream and leaves it).
func (e *Engine) Close() error {
	if e.fleet != nil {
		e.fleet.close()
	}
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

// abandon closes the engine as a killed process would leave it,
// without the checkpoint it hands its witnesses at close (crash tests).
func (e *Engine) abandon() error {
	if e.stopWitness != nil {
		close(e.stopWitness)
		<-e.witnessDone
		e.stopWitness = nil
	}
	return e.Close()
}
