package pedigree

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Bootstrap is the view of an engine's registry before freeze: principals
// are added, then the operator freezes it, once.
type Bootstrap struct{ e *Engine }

// Bootstrap is the engine's registry before freeze.
func (e *Engine) Bootstrap() *Bootstrap { return &Bootstrap{e} }

// AddPrincipal registers a principal; ErrFrozen after freeze.
func (b *Bootstrap) AddPrincipal(ctx context.Context, p registry.Principal) error {
	return b.e.addPrincipal(ctx, p)
}

// Freeze freezes the registry with the operator key, keeps a copy of the
// signed freeze record beside the store (registry.freeze), and seals the
// configuration the directory holds (SealFile).
func (b *Bootstrap) Freeze(ctx context.Context, operator *registry.Signer) error {
	return b.e.freeze(ctx, operator)
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
