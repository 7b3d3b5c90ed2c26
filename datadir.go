package pedigree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Files in the data directory besides the store.
const (
	OperatorKeyFile = "operator.key"
	FreezeFile      = "registry.freeze"
	ToolsFile       = "tools.yaml"
	ModelFile       = "trajectory-model.json"
)

// DefaultTau is the strong-edge threshold unless init is told otherwise.
const DefaultTau = 0.5

// Init creates a data directory: the store, τ, and the operator key (written
// to dir/operator.key, mode 0600), which signs the registry freeze. It
// refuses a directory that already holds a store.
func Init(ctx context.Context, dir string, tau float64, opts ...Option) (*Engine, error) {
	if err := registry.ValidateTau(tau); err != nil {
		return nil, err
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if fileExists(filepath.Join(dir, OperatorKeyFile)) {
		return nil, fmt.Errorf("%s: %w", dir, store.ErrExists)
	}
	db, err := store.Create(dir, store.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	// Anything that fails from here leaves no half-made store behind.
	undo := func(err error) (*Engine, error) {
		db.Close()
		os.RemoveAll(filepath.Join(dir, "db"))
		os.Remove(filepath.Join(dir, OperatorKeyFile))
		return nil, err
	}
	op, priv, err := registry.GenerateSigner(nil)
	if err != nil {
		return undo(err)
	}
	if err := registry.Bootstrap(ctx, db.Space(store.Registry), tau, op.Public(), c.clock()); err != nil {
		return undo(err)
	}
	if err := registry.WritePrivateKeyFile(filepath.Join(dir, OperatorKeyFile), priv); err != nil {
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
	if err := registry.Bootstrap(ctx, db.Space(store.Registry), tau, operator.Public(), c.clock()); err != nil {
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
	db, err := store.Open(dir, store.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	return open(ctx, db, dir, c)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// AddPrincipal registers a principal; ErrFrozen after freeze.
func (e *Engine) AddPrincipal(ctx context.Context, p registry.Principal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.reg.Add(ctx, p)
}

// Freeze freezes the registry with the operator key, and keeps a copy of
// the signed freeze record beside the store (registry.freeze).
func (e *Engine) Freeze(ctx context.Context, operator *registry.Signer) error {
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
	path := filepath.Join(e.dir, FreezeFile)
	if err := os.WriteFile(path+".tmp", rec, 0o444); err != nil {
		return fmt.Errorf("the registry is frozen, but its copy could not be written: %w", err)
	}
	return os.Rename(path+".tmp", path)
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
	copyRec, err := os.ReadFile(filepath.Join(dir, FreezeFile))
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
