package registry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pedigree-ai/pedigree/kv"
)

// A genesis is a frozen registry as one value: τ, the operator key, every
// principal with its public key, and the operator-signed freeze record. It
// is what a fleet's stream carries first: a node with an empty directory
// installs its registry from it, after checking it against the operator key
// the node pins outside any directory; a node with a registry already
// refuses a genesis that differs from its own.

// ErrGenesis: a genesis that is malformed, not frozen, or signed by another
// operator key than the pinned one.
var ErrGenesis = errors.New("bad registry genesis")

type genesis struct {
	Version int `json:"version"`
	// Meta is the registry's meta row as stored (τ, the operator key,
	// the approval cap): the freeze manifest covers its digest.
	Meta       []byte         `json:"meta"`
	Principals []principalRow `json:"principals"`
	Freeze     freezeRow      `json:"freeze"`
}

// Genesis is the frozen registry as a genesis (canonical bytes: the same
// registry always gives the same bytes). ErrNotFrozen before freeze.
func (r *Registry) Genesis() ([]byte, error) {
	rec, err := r.FreezeRecord()
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, ErrNotFrozen
	}
	g := genesis{Version: 2, Principals: []principalRow{}}
	if err := r.db.View(func(t kv.Txn) error {
		var err error
		g.Meta, err = t.Get(keyMeta)
		return err
	}); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(rec, &g.Freeze); err != nil {
		return nil, err
	}
	for _, p := range r.List() {
		row, err := newPrincipalRow(p)
		if err != nil {
			return nil, err
		}
		g.Principals = append(g.Principals, row)
	}
	return json.Marshal(g)
}

// CheckGenesis decodes a genesis and checks it: the operator key it names is
// pinned, its freeze record verifies with that key, and the signed manifest
// matches its principals and τ exactly.
func CheckGenesis(b []byte, pinned ed25519.PublicKey) error {
	_, err := openGenesis(b, pinned)
	return err
}

func openGenesis(b []byte, pinned ed25519.PublicKey) (*genesis, error) {
	var g genesis
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGenesis, err)
	}
	if g.Version != 2 {
		return nil, fmt.Errorf("%w: version %d", ErrGenesis, g.Version)
	}
	var m metaRow
	if err := json.Unmarshal(g.Meta, &m); err != nil {
		return nil, fmt.Errorf("%w: meta row: %v", ErrGenesis, err)
	}
	if err := ValidateTau(m.Tau); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGenesis, err)
	}
	op, err := ParsePublicKey([]byte(m.OperatorKey))
	if err != nil {
		return nil, fmt.Errorf("%w: operator key: %v", ErrGenesis, err)
	}
	if len(pinned) != ed25519.PublicKeySize || !op.Equal(pinned) {
		return nil, fmt.Errorf("%w: it is frozen by operator key %s, not by the pinned trust root", ErrGenesis, KeyFingerprint(op)[:16])
	}
	sum := sha256.Sum256(g.Meta)
	r := &Registry{tau: m.Tau, maxTTL: DefaultMaxApprovalTTL, operator: op, metaDigest: hex.EncodeToString(sum[:]),
		principals: map[string]Principal{}, verifiers: map[string]*Verifier{}}
	if m.MaxApprovalTTL != "" {
		if r.maxTTL, err = time.ParseDuration(m.MaxApprovalTTL); err != nil || r.maxTTL <= 0 {
			return nil, fmt.Errorf("%w: approval cap %q", ErrGenesis, m.MaxApprovalTTL)
		}
	}
	for _, row := range g.Principals {
		if err := ValidateID(row.ID); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrGenesis, err)
		}
		if !row.Tier.Valid() {
			return nil, fmt.Errorf("%w: principal %s: %v", ErrGenesis, row.ID, ErrBadTier)
		}
		pub, err := rowKey(row)
		if err != nil {
			return nil, fmt.Errorf("%w: principal %s: %v", ErrGenesis, row.ID, err)
		}
		if _, dup := r.principals[row.ID]; dup {
			return nil, fmt.Errorf("%w: principal %s twice", ErrGenesis, row.ID)
		}
		if err := r.put(Principal{ID: row.ID, Tier: row.Tier, PublicKey: pub, Approver: row.Approver}); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrGenesis, err)
		}
	}
	if err := r.checkFreeze(&g.Freeze); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGenesis, err)
	}
	return &g, nil
}

// Install writes the registry a genesis describes into an empty registry
// namespace, after CheckGenesis. Load then reads it as frozen (and checks
// the freeze again, as for any store).
func Install(ctx context.Context, db kv.Store, b []byte, pinned ed25519.PublicKey) error {
	g, err := openGenesis(b, pinned)
	if err != nil {
		return err
	}
	meta := g.Meta
	freeze, _ := json.Marshal(g.Freeze)
	return db.Commit(ctx, len(b)+len(meta), func(t kv.Txn) error {
		if ok, err := t.Has(keyMeta); err != nil || ok {
			return errors.Join(err, ErrExists)
		}
		if err := t.Set(keyMeta, meta); err != nil {
			return err
		}
		for _, row := range g.Principals {
			v, _ := json.Marshal(row)
			if err := t.Set(append(slices.Clone(prefixPrincipal), row.ID...), v); err != nil {
				return err
			}
		}
		return t.Set(keyFreeze, freeze)
	})
}
