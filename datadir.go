package pedigree

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Files in the data directory besides the store. The operator key is not
// among them: Init writes it where WithOperatorKeyFile says.
const (
	FreezeFile = "registry.freeze"
	ToolsFile  = "tools.yaml"
	ModelFile  = "trajectory-model.json"
)

// DefaultTau is the strong-edge threshold unless init is told otherwise.
const DefaultTau = 0.5

// WithOperatorKeyFile makes Init write a new operator key to path (PEM,
// mode 0600, never overwriting) and its public half, the trust root, beside
// it (TrustRootPath). Keep path outside the data directory: whoever can
// write the directory must not find the key that freezes its registry.
func WithOperatorKeyFile(path string) Option { return func(c *config) { c.operatorKeyFile = path } }

// WithOperatorSigner makes Init use an operator key the caller holds
// (nothing is written).
func WithOperatorSigner(s *registry.Signer) Option { return func(c *config) { c.operator = s } }

// WithMaxApprovalTTL sets, at Init, the cap on every approval's lifetime
// (default registry.DefaultMaxApprovalTTL); it is frozen with the registry.
func WithMaxApprovalTTL(d time.Duration) Option { return func(c *config) { c.maxApprovalTTL = d } }

// ErrNoOperatorKey: Init was told neither where to write the operator key
// nor which one to use.
var ErrNoOperatorKey = fmt.Errorf("%w: Init needs WithOperatorKeyFile or WithOperatorSigner", ErrOptions)

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

// newEngineKey is the engine key Init registers: the one given
// (WithEngineSigner), else a new one, whose private half the caller
// writes (returned).
func newEngineKey(c *config) (*registry.Signer, ed25519.PrivateKey, error) {
	if c.engine != nil {
		return c.engine, nil, nil
	}
	s, priv, err := registry.GenerateSigner(nil)
	if err != nil {
		return nil, nil, err
	}
	c.engine = s
	return s, priv, nil
}

// registerEngine registers the engine key as EnginePrincipal in a new
// store's registry: freeze certifies it with the other principals.
func registerEngine(ctx context.Context, db *store.DB, s *registry.Signer) error {
	reg, err := registry.Load(db.Space(store.Registry))
	if err != nil {
		return err
	}
	return reg.Add(ctx, registry.Principal{ID: EnginePrincipal, Tier: registry.External, PublicKey: s.Public()})
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

// dataFiles are the names pedigree keeps in a data directory beside the
// store (the server's serve.json and serve.token included).
var dataFiles = []string{FreezeFile, SealFile, ToolsFile, ModelFile, MCPConfigFile, HookMappingFile, "serve.json", "serve.token", "pedigree.sock", "mcp", "hook-state", "hook-keys"}

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

// addPrincipal registers a principal; ErrFrozen after freeze.
func (e *Engine) addPrincipal(ctx context.Context, p registry.Principal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A registration after freeze is an attempt worth logging; its payload
	// digest covers the ID and the key, never the key itself.
	if err := e.reg.Add(ctx, p); errors.Is(err, registry.ErrFrozen) {
		return e.refused(ctx, err, p.ID, append([]byte(p.ID+"\x00"), keyBytes(p.PublicKey)...))
	} else if err != nil {
		return err
	}
	return nil
}

// freeze freezes the registry with the operator key, keeps a copy of the
// signed freeze record beside the store (registry.freeze), and seals the
// configuration the directory holds (SealFile).
func (e *Engine) freeze(ctx context.Context, operator *registry.Signer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.reg.Freeze(ctx, operator, e.cfg.clock()); err != nil {
		return err
	}
	if e.dir == "" {
		return nil
	}
	rec, err := e.reg.FreezeRecord()
	if err != nil {
		return err
	}
	if err := safefile.WriteFile(e.dir, FreezeFile, rec, 0o444); err != nil {
		return fmt.Errorf("the registry is frozen, but its copy could not be written: %w", err)
	}
	// The configuration the directory holds now is what the operator froze.
	return e.seal(operator)
}

// checkFreezeAnchors refuses a store whose freeze record was deleted or
// swapped: entries exist only after freeze, and the copy beside the store
// must match the record in it.
func checkFreezeAnchors(dir string, reg *registry.Registry, graph *lineage.Graph) error {
	rec, err := reg.FreezeRecord()
	if err != nil {
		return err
	}
	if rec == nil {
		n, err := graph.Count(1)
		if err != nil {
			return err
		}
		if n > 0 {
			return &registry.TamperError{Differences: []string{"the store holds entries but no freeze record: it was deleted"}}
		}
	}
	if dir == "" {
		return nil
	}
	copyRec, err := safefile.ReadFile(dir, FreezeFile, MaxConfigBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case rec == nil:
		return &registry.TamperError{Differences: []string{FreezeFile + " exists but the store has no freeze record: it was deleted"}}
	case !bytes.Equal(copyRec, rec):
		return &registry.TamperError{Differences: []string{"the store's freeze record differs from " + FreezeFile}}
	}
	return nil
}

// keyBytes is what a refused registration's payload digest covers of the
// key: the raw Ed25519 key, else its PEM (nothing for a key of neither).
func keyBytes(pub registry.PublicKey) []byte {
	if k, ok := pub.(ed25519.PublicKey); ok {
		return k
	}
	b, _ := registry.MarshalPrincipalKey(pub)
	return b
}
