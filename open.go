package pedigree

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Init creates a data directory: the store, τ, the approval cap, and the
// operator key that signs the registry freeze (see WithOperatorKeyFile and
// WithOperatorSigner). It refuses a directory that already holds a store.
func Init(ctx context.Context, dir string, tau float64, opts ...Option) (*Engine, error) {
	if err := registry.ValidateTau(tau); err != nil {
		return nil, err
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if (c.operatorKeyFile == "") == (c.operator == nil) {
		return nil, ErrNoOperatorKey
	}
	if c.maxApprovalTTL < 0 {
		return nil, fmt.Errorf("%w, got %s", registry.ErrBadTTL, c.maxApprovalTTL)
	}
	op := c.operator
	var priv ed25519.PrivateKey
	if op == nil {
		var err error
		if op, priv, err = registry.GenerateSigner(nil); err != nil {
			return nil, err
		}
		// Refuse before anything is made: a key is never overwritten. A
		// store that is there already is said first: it is why the key is.
		if store.Exists(dir) {
			return nil, fmt.Errorf("%s: %w", dir, ErrExists)
		}
		for _, p := range []string{c.operatorKeyFile, TrustRootPath(c.operatorKeyFile)} {
			if fileExists(p) {
				return nil, fmt.Errorf("%s: %w", p, os.ErrExist)
			}
		}
	}
	engine, enginePriv, err := newEngineKey(&c)
	if err != nil {
		return nil, err
	}
	engineFile := c.engineKeyFileFor(dir)
	db, err := store.Create(dir, store.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	if enginePriv != nil && fileExists(engineFile) {
		db.Close()
		os.RemoveAll(filepath.Join(dir, "db"))
		return nil, fmt.Errorf("%s: %w", engineFile, os.ErrExist)
	}
	// Anything that fails from here leaves no half-made store behind.
	var written []string
	undo := func(err error) (*Engine, error) {
		db.Close()
		os.RemoveAll(filepath.Join(dir, "db"))
		for _, p := range written {
			safefile.Remove(filepath.Dir(p), filepath.Base(p), safefile.Regular)
		}
		return nil, err
	}
	opPub, err := op.Ed25519()
	if err != nil {
		return undo(err)
	}
	if err := registry.BootstrapWith(ctx, db.Space(store.Registry), registry.Config{Tau: tau, Operator: opPub, MaxApprovalTTL: c.maxApprovalTTL}, c.clock()); err != nil {
		return undo(err)
	}
	if priv != nil {
		if err := registry.WritePrivateKeyFile(c.operatorKeyFile, priv); err != nil {
			return undo(err)
		}
		written = append(written, c.operatorKeyFile)
		if err := registry.WritePublicKeyFile(TrustRootPath(c.operatorKeyFile), opPub); err != nil {
			return undo(err)
		}
		written = append(written, TrustRootPath(c.operatorKeyFile))
	}
	if enginePriv != nil {
		if err := registry.WritePrivateKeyFile(engineFile, enginePriv); err != nil {
			return undo(err)
		}
		written = append(written, engineFile)
	}
	if err := registerEngine(ctx, db, engine); err != nil {
		return undo(err)
	}
	return open(ctx, db, dir, c)
}

// NewInMemory makes a fresh in-memory engine whose operator is the given
// signer (replays and tests): register principals, Freeze, then use it.
func NewInMemory(ctx context.Context, tau float64, operator *registry.Signer, opts ...Option) (*Engine, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	db, err := store.Create("", store.Options{InMemory: true})
	if err != nil {
		return nil, err
	}
	opPub, err := operator.Ed25519()
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := registry.BootstrapWith(ctx, db.Space(store.Registry), registry.Config{Tau: tau, Operator: opPub, MaxApprovalTTL: c.maxApprovalTTL}, c.clock()); err != nil {
		db.Close()
		return nil, err
	}
	// An in-memory engine's key lives as long as it does.
	engine, _, err := newEngineKey(&c)
	if err == nil {
		err = registerEngine(ctx, db, engine)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return open(ctx, db, "", c)
}

// Open opens an existing data directory. It refuses a store whose registry
// was changed behind the engine's back since freeze (*registry.TamperError).
func Open(ctx context.Context, dir string, opts ...Option) (*Engine, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkNoLinks(dir); err != nil {
		return nil, err
	}
	db, err := store.Open(dir, store.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	return open(ctx, db, dir, c)
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
	for _, w := range c.witnessFiles {
		if err := witnessOutside(dir, w); err != nil {
			return fail(err)
		}
	}
	e := &Engine{db: db, reg: reg, graph: graph, log: tl, decisions: decisionlog.New(db.Space(store.Decisions), c.model),
		gate: g, cfg: c, dir: dir}
	e.committer = localCommitter{e}
	e.loadEngineKey()
	if err := tl.SetEngineKeys(e.engineKeyList()); err != nil {
		return fail(err)
	}
	e.checkWitnesses()
	e.witnessLoop()
	return e, nil
}

// checkNoLinks refuses a data directory whose files are links (a symbolic
// link, or a regular file with another hard link): a directory pedigree
// made has none, and one planted there would have the engine read, or a
// later write replace, a file elsewhere. The store's own files (db/) are
// checked by the store.
func checkNoLinks(dir string) error {
	if err := safefile.CheckNoLinks(dir, dataFiles...); err != nil {
		return fmt.Errorf("refusing the data directory: %w", err)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
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

// The hatches around the facade, for pedigree's own tests (internal/hatch).
func init() {
	hatch.Registry = func(e any) *registry.Registry { return e.(*Engine).reg }
	hatch.Graph = func(e any) *lineage.Graph { return e.(*Engine).graph }
	hatch.Gate = func(e any) *gate.Gate { return e.(*Engine).gate }
	hatch.Log = func(e any) *tlog.Log { return e.(*Engine).log }
	hatch.Abandon = func(e any) error { return e.(*Engine).abandon() }
}

// Seal signs, with the operator key, the configuration that dir holds now
// (tools.yaml and trajectory-model.json), after the operator has changed it.
// The store must be frozen, and operator must be the key that froze it. A
// running server reads the configuration at start: restart it.
func Seal(ctx context.Context, dir string, operator *registry.Signer, opts ...Option) error {
	if dir == "" {
		return fmt.Errorf("%w: Seal needs a data directory", ErrOptions)
	}
	e, err := Open(ctx, dir, append(slices.Clip(opts), withoutSeal())...)
	if err != nil {
		return err
	}
	defer e.Close()
	if !e.reg.Frozen() {
		return errors.New("the registry is not frozen: freezing it seals the configuration")
	}
	return e.seal(operator)
}
