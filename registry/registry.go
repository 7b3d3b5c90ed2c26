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
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree/kv"
)

var (
	// ErrFrozen: the registry is frozen and no principal can be added, removed or changed.
	ErrFrozen = errors.New("the registry is frozen: no principal can be added or changed")
	// ErrNotFrozen: entries can only be recorded against a frozen registry.
	ErrNotFrozen = errors.New("the registry is not frozen yet")
	// ErrUnknownPrincipal: no principal with that ID is registered.
	ErrUnknownPrincipal = errors.New("unknown principal")
	// ErrDuplicate: a principal with that ID is already registered.
	ErrDuplicate = errors.New("principal already registered")
	// ErrBadTier, ErrBadID, ErrBadKey: malformed input.
	ErrBadTier = errors.New("unknown tier")
	ErrBadID   = errors.New("malformed principal ID")
	ErrBadKey  = errors.New("bad key")
	// ErrBadSignature: a signature did not verify.
	ErrBadSignature = errors.New("bad signature")
	// ErrBadApprover: approval authority given to a principal that cannot hold it.
	ErrBadApprover = errors.New("approval authority refused")
	// ErrBadTau: τ outside (0, 1].
	ErrBadTau = errors.New("tau must be in (0, 1]")
)

// ErrTampered is what every "the evidence is bad" error wraps: stored
// facts that were changed behind the engine's back. Keep it apart from an
// error that means the engine could not check (an I/O error, a closed
// store): both refuse, but they read differently.
var ErrTampered = errors.New("tampered with")

// TamperError says that the registry in the store differs from what the
// operator froze. Open refuses such a store. It wraps ErrTampered.
type TamperError struct {
	Differences []string
}

func (e *TamperError) Error() string {
	return "registry tampered with since freeze: " + strings.Join(e.Differences, "; ")
}

// Unwrap makes errors.Is(err, ErrTampered) true.
func (e *TamperError) Unwrap() error { return ErrTampered }

// Rows of the registry's namespace.
var (
	keyMeta         = []byte("meta")
	keyFreeze       = []byte("freeze")
	prefixPrincipal = []byte("p/")
)

// ErrExists: Bootstrap was asked to write a registry into a store that has one.
var ErrExists = errors.New("the store already holds a registry")

type metaRow struct {
	Tau         float64 `json:"tau"`
	OperatorKey string  `json:"operator_key"`
	Created     string  `json:"created"`
	// MaxApprovalTTL caps an approval's lifetime (a Go duration); frozen
	// with the registry.
	MaxApprovalTTL string `json:"max_approval_ttl,omitempty"`
}

type principalRow struct {
	ID        string `json:"id"`
	Tier      Tier   `json:"tier"`
	PublicKey string `json:"public_key"`
	// Algorithm is the key's algorithm, written only when it is not
	// Ed25519: a store made before P-256 keys reads as it was written.
	Algorithm string `json:"algorithm,omitempty"`
	Approver  bool   `json:"approver,omitempty"`
}

// newPrincipalRow is the row Add writes for p.
func newPrincipalRow(p Principal) (principalRow, error) {
	alg, err := Algorithm(p.PublicKey)
	if err != nil {
		return principalRow{}, err
	}
	pemBytes, err := MarshalPrincipalKey(p.PublicKey)
	if err != nil {
		return principalRow{}, err
	}
	return principalRow{ID: p.ID, Tier: p.Tier, PublicKey: string(pemBytes), Algorithm: rowAlgorithm(alg), Approver: p.Approver}, nil
}

// rowAlgorithm is how a row and a manifest entry name alg: Ed25519, the
// default, is not named.
func rowAlgorithm(alg string) string {
	if alg == AlgEd25519 {
		return ""
	}
	return alg
}

// rowKey reads a row's key and checks it has the algorithm the row names.
func rowKey(row principalRow) (PublicKey, error) {
	pub, err := ParsePrincipalKey([]byte(row.PublicKey))
	if err != nil {
		return nil, err
	}
	alg, _ := Algorithm(pub)
	if rowAlgorithm(alg) != row.Algorithm {
		return nil, fmt.Errorf("%w: the row names algorithm %q, its key is %s", ErrBadKey, row.Algorithm, alg)
	}
	return pub, nil
}

// manifestVersion 2 adds the operator key, the approval cap and each
// principal's approval authority to what the operator signs.
const manifestVersion = 2

// manifest is what the operator signs at freeze: every principal (with its
// approval authority), τ, the approval cap and the operator key itself, so
// that the freeze record's digest pins all of them.
type manifest struct {
	Version        int     `json:"version"`
	Tau            float64 `json:"tau"`
	MaxApprovalTTL string  `json:"max_approval_ttl"`
	OperatorKey    string  `json:"operator_key_sha256"`
	// Meta is the sha256 of the registry's meta row (τ, the operator key,
	// the approval cap, its creation time) as frozen: a row rewritten after
	// freeze is refused.
	Meta       string          `json:"meta_sha256"`
	Principals []manifestEntry `json:"principals"`
	Digest     string          `json:"digest"`
	Time       string          `json:"time"`
}

type manifestEntry struct {
	ID   string `json:"id"`
	Tier Tier   `json:"tier"`
	Key  string `json:"key_sha256"`
	// Algorithm: as in a principal row, only when not Ed25519.
	Algorithm string `json:"algorithm,omitempty"`
	Approver  bool   `json:"approver,omitempty"`
}

type freezeRow struct {
	Manifest  []byte `json:"manifest"`
	Signature []byte `json:"signature"`
}

// Registry is the set of principals, τ, and whether they are frozen. It is a
// value loaded from a store (its own namespace, through the kv contract);
// writes go through to the store.
type Registry struct {
	db kv.Store

	mu         sync.RWMutex
	tau        float64
	maxTTL     time.Duration
	operator   ed25519.PublicKey
	principals map[string]Principal
	verifiers  map[string]*Verifier
	frozen     bool
	metaDigest string
	oddRows    []string // principal rows not in the form Add writes
}

// ValidateTau checks a strong-edge threshold.
func ValidateTau(tau float64) error {
	if math.IsNaN(tau) || tau <= 0 || tau > 1 {
		return fmt.Errorf("%w, got %v", ErrBadTau, tau)
	}
	return nil
}

// DefaultMaxApprovalTTL caps an approval's lifetime unless bootstrap says
// otherwise.
const DefaultMaxApprovalTTL = 24 * time.Hour

// ErrBadTTL: an approval cap that is not positive.
var ErrBadTTL = errors.New("the approval lifetime cap must be positive")

// Bootstrap writes a new, empty registry with τ and the operator's public
// key into a fresh store, with the default approval cap.
func Bootstrap(ctx context.Context, db kv.Store, tau float64, operator ed25519.PublicKey, now time.Time) error {
	return BootstrapWith(ctx, db, Config{Tau: tau, Operator: operator}, now)
}

// Config is what bootstrap fixes for good (it is frozen with the registry).
type Config struct {
	Tau      float64
	Operator ed25519.PublicKey
	// MaxApprovalTTL caps every approval's lifetime; 0 means
	// DefaultMaxApprovalTTL.
	MaxApprovalTTL time.Duration
}

// BootstrapWith is Bootstrap with every setting given.
func BootstrapWith(ctx context.Context, db kv.Store, c Config, now time.Time) error {
	if err := ValidateTau(c.Tau); err != nil {
		return err
	}
	switch {
	case c.MaxApprovalTTL < 0:
		return fmt.Errorf("%w, got %s", ErrBadTTL, c.MaxApprovalTTL)
	case c.MaxApprovalTTL == 0:
		c.MaxApprovalTTL = DefaultMaxApprovalTTL
	}
	pemBytes, err := MarshalPublicKey(c.Operator)
	if err != nil {
		return err
	}
	row, _ := json.Marshal(metaRow{Tau: c.Tau, OperatorKey: string(pemBytes), Created: now.UTC().Format(time.RFC3339Nano),
		MaxApprovalTTL: c.MaxApprovalTTL.String()})
	return db.Commit(ctx, len(row), func(t kv.Txn) error {
		if ok, err := t.Has(keyMeta); err != nil || ok {
			return errors.Join(err, ErrExists)
		}
		return t.Set(keyMeta, row)
	})
}

// Load reads the registry from db. When it is frozen, the signed manifest is
// checked against every principal row: any row added, removed or changed
// behind the engine's back fails with a *TamperError.
func Load(db kv.Store) (*Registry, error) {
	r := &Registry{db: db, principals: map[string]Principal{}, verifiers: map[string]*Verifier{}}
	var fr *freezeRow
	err := db.View(func(t kv.Txn) error {
		b, err := t.Get(keyMeta)
		if err != nil {
			return fmt.Errorf("read registry: %w", err)
		}
		var m metaRow
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("read registry: %w", err)
		}
		sum := sha256.Sum256(b)
		r.metaDigest = hex.EncodeToString(sum[:])
		r.tau = m.Tau
		// Bootstrap always writes the cap: a row without one was edited.
		if r.maxTTL, err = time.ParseDuration(m.MaxApprovalTTL); err != nil || r.maxTTL <= 0 {
			return fmt.Errorf("read registry: approval cap %q: %w", m.MaxApprovalTTL, ErrBadTTL)
		}
		if r.operator, err = ParsePublicKey([]byte(m.OperatorKey)); err != nil {
			return fmt.Errorf("operator key: %w", err)
		}
		if err := t.Iterate(prefixPrincipal, true, func(k, v []byte) error {
			var row principalRow
			if err := json.Unmarshal(v, &row); err != nil {
				return fmt.Errorf("principal row %q: %w", k, err)
			}
			// encoding/json matches keys without case: a row is read only in
			// the form this package writes, so no edit of it goes unseen.
			if again, _ := json.Marshal(row); !bytes.Equal(again, v) {
				r.oddRows = append(r.oddRows, string(k))
			}
			pub, err := rowKey(row)
			if err != nil {
				return fmt.Errorf("principal %s: %w", row.ID, err)
			}
			if string(k[len(prefixPrincipal):]) != row.ID {
				return &TamperError{Differences: []string{fmt.Sprintf("row %q holds principal %q", k, row.ID)}}
			}
			return r.put(Principal{ID: row.ID, Tier: row.Tier, PublicKey: pub, Approver: row.Approver})
		}); err != nil {
			return err
		}
		b, err = t.Get(keyFreeze)
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		fr = new(freezeRow)
		return json.Unmarshal(b, fr)
	})
	if err != nil {
		return nil, err
	}
	if fr != nil {
		if err := r.checkFreeze(fr); err != nil {
			return nil, err
		}
	}
	if err := r.checkKeysDistinct(); err != nil {
		return nil, err
	}
	return r, nil
}

// checkKeysDistinct refuses a registry in which one public key speaks for
// two principals, or the operator key for one (see checkKeyUnused): Add
// refuses both, but a store registered before it did may hold them, frozen
// and signed.
func (r *Registry) checkKeysDistinct() error {
	holder := map[string]string{KeyFingerprint(r.operator): "the operator"}
	for _, id := range r.sortedIDs() {
		fp := KeyFingerprint(r.principals[id].PublicKey)
		if other, ok := holder[fp]; ok {
			return fmt.Errorf("%w: %s and %s hold one public key (registered before that was refused); each principal needs a key of its own: initialise a new store", ErrBadKey, other, id)
		}
		holder[fp] = id
	}
	return nil
}

func (r *Registry) put(p Principal) error {
	v, err := newVerifier(p.PublicKey)
	if err != nil {
		return err
	}
	r.principals[p.ID] = p
	r.verifiers[p.ID] = v
	return nil
}

func (r *Registry) checkFreeze(fr *freezeRow) error {
	ov, err := newVerifier(r.operator)
	if err != nil {
		return err
	}
	if err := ov.Verify(fr.Signature, fr.Manifest); err != nil {
		return &TamperError{Differences: []string{"the freeze record's signature does not verify with the operator key"}}
	}
	var m manifest
	if err := json.Unmarshal(fr.Manifest, &m); err != nil {
		return &TamperError{Differences: []string{"the freeze record cannot be read: " + err.Error()}}
	}
	if m.Version != manifestVersion {
		return &TamperError{Differences: []string{fmt.Sprintf("the freeze record is version %d; this pedigree reads version %d", m.Version, manifestVersion)}}
	}
	var diffs []string
	if m.Meta != r.metaDigest {
		diffs = append(diffs, "the registry's meta row (tau, the operator key) was rewritten since freeze")
	}
	if m.Tau != r.tau {
		diffs = append(diffs, fmt.Sprintf("tau is %v, frozen as %v", r.tau, m.Tau))
	}
	if m.MaxApprovalTTL != r.maxTTL.String() {
		diffs = append(diffs, fmt.Sprintf("the approval cap is %s, frozen as %s", r.maxTTL, m.MaxApprovalTTL))
	}
	if m.OperatorKey != KeyFingerprint(r.operator) {
		diffs = append(diffs, "the operator key is not the one the freeze record names")
	}
	seen := map[string]bool{}
	for _, e := range m.Principals {
		seen[e.ID] = true
		p, ok := r.principals[e.ID]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("principal %s was removed", e.ID))
		case p.Tier != e.Tier:
			diffs = append(diffs, fmt.Sprintf("principal %s has tier %s, frozen as %s", e.ID, p.Tier, e.Tier))
		case KeyFingerprint(p.PublicKey) != e.Key:
			diffs = append(diffs, fmt.Sprintf("principal %s has a different public key than at freeze", e.ID))
		case manifestAlgorithm(p) != e.Algorithm:
			diffs = append(diffs, fmt.Sprintf("principal %s has key algorithm %q, frozen as %q", e.ID, manifestAlgorithm(p), e.Algorithm))
		case p.Approver != e.Approver:
			diffs = append(diffs, fmt.Sprintf("principal %s has approval authority %v, frozen as %v", e.ID, p.Approver, e.Approver))
		}
	}
	for _, id := range r.sortedIDs() {
		if !seen[id] {
			diffs = append(diffs, fmt.Sprintf("principal %s was added after freeze", id))
		}
	}
	if d := digest(&m); d != m.Digest {
		diffs = append(diffs, "the frozen digest does not match its principals")
	}
	if len(diffs) == 0 {
		for _, k := range r.oddRows {
			diffs = append(diffs, fmt.Sprintf("principal row %q is not in the form pedigree writes", k))
		}
	}
	if len(diffs) > 0 {
		return &TamperError{Differences: diffs}
	}
	r.frozen = true
	return nil
}

// manifestAlgorithm is how the manifest names p's key algorithm.
func manifestAlgorithm(p Principal) string {
	alg, _ := Algorithm(p.PublicKey)
	return rowAlgorithm(alg)
}

func (r *Registry) sortedIDs() []string {
	ids := make([]string, 0, len(r.principals))
	for id := range r.principals {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// digest is a sha256 over every principal (ID, tier, key, approval
// authority), τ, the approval cap, the operator key and the meta row's
// digest, in ID order.
func digest(m *manifest) string {
	h := sha256.New()
	fmt.Fprintf(h, "pedigree-registry-v2\ntau=%s\nmax_approval_ttl=%s\noperator=%s\nmeta=%s\n",
		strconv.FormatFloat(m.Tau, 'g', -1, 64), m.MaxApprovalTTL, m.OperatorKey, m.Meta)
	for _, p := range m.Principals {
		if p.Algorithm == "" {
			fmt.Fprintf(h, "%s\x00%s\x00%s\x00%t\n", p.ID, p.Tier, p.Key, p.Approver)
		} else {
			fmt.Fprintf(h, "%s\x00%s\x00%s\x00%t\x00%s\n", p.ID, p.Tier, p.Key, p.Approver, p.Algorithm)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Add registers a principal. It fails with ErrFrozen once the registry is
// frozen, whatever the caller.
func (r *Registry) Add(ctx context.Context, p Principal) error {
	if err := ValidateID(p.ID); err != nil {
		return err
	}
	if !p.Tier.Valid() {
		return fmt.Errorf("%w: %d", ErrBadTier, uint8(p.Tier))
	}
	if p.Approver && p.Tier != User {
		return fmt.Errorf("%w: %s is %s tier; only a user-tier principal can hold approval authority", ErrBadApprover, p.ID, p.Tier)
	}
	pr, err := newPrincipalRow(p)
	if err != nil {
		return err
	}
	row, _ := json.Marshal(pr)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return ErrFrozen
	}
	if err := r.checkKeyUnused(p); err != nil {
		return err
	}
	key := append(slices.Clone(prefixPrincipal), p.ID...)
	err = r.db.Commit(ctx, len(row), func(t kv.Txn) error {
		// The store is the authority: another process may have frozen it.
		if ok, err := t.Has(keyFreeze); err != nil || ok {
			return errors.Join(err, ErrFrozen)
		}
		if ok, err := t.Has(key); err != nil || ok {
			return errors.Join(err, fmt.Errorf("%w: %s", ErrDuplicate, p.ID))
		}
		return t.Set(key, row)
	})
	if err != nil {
		return err
	}
	return r.put(p)
}

// checkKeyUnused refuses a key that already speaks for someone: one key for
// two principals would let a user's key write as an internal agent (or the
// other way round), and the operator key as a principal's would let whoever
// holds it write as that principal. The caller holds r.mu.
func (r *Registry) checkKeyUnused(p Principal) error {
	if p.PublicKey.Equal(r.operator) {
		return fmt.Errorf("%w: %s: that public key is the operator key; a principal needs a key of its own", ErrBadKey, p.ID)
	}
	for _, q := range r.principals {
		if q.ID != p.ID && q.PublicKey.Equal(p.PublicKey) {
			return fmt.Errorf("%w: %s: that public key is already registered for %s; each principal needs a key of its own", ErrBadKey, p.ID, q.ID)
		}
	}
	return nil
}

// Freeze signs a manifest of every principal and τ with the operator key and
// stores it. From then on the registry cannot change.
func (r *Registry) Freeze(ctx context.Context, operator *Signer, now time.Time) error {
	if !operator.Public().Equal(r.operator) {
		return fmt.Errorf("%w: not the operator key this store was initialised with", ErrBadKey)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return ErrFrozen
	}
	m := manifest{Version: manifestVersion, Tau: r.tau, MaxApprovalTTL: r.maxTTL.String(),
		OperatorKey: KeyFingerprint(r.operator), Meta: r.metaDigest, Time: now.UTC().Format(time.RFC3339Nano)}
	for _, id := range r.sortedIDs() {
		p := r.principals[id]
		m.Principals = append(m.Principals, manifestEntry{ID: id, Tier: p.Tier, Key: KeyFingerprint(p.PublicKey), Algorithm: manifestAlgorithm(p), Approver: p.Approver})
	}
	if m.Principals == nil {
		m.Principals = []manifestEntry{}
	}
	m.Digest = digest(&m)
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	sig, err := operator.Sign(mb)
	if err != nil {
		return err
	}
	row, _ := json.Marshal(freezeRow{Manifest: mb, Signature: sig})
	err = r.db.Commit(ctx, len(row), func(t kv.Txn) error {
		if ok, err := t.Has(keyFreeze); err != nil || ok {
			return errors.Join(err, ErrFrozen)
		}
		// Freeze exactly the rows that are in the store now.
		n := 0
		if err := t.Iterate(prefixPrincipal, false, func(k, _ []byte) error {
			n++
			if _, ok := r.principals[string(k[len(prefixPrincipal):])]; !ok {
				return fmt.Errorf("principal %s was added by another process: reopen and freeze again", k[len(prefixPrincipal):])
			}
			return nil
		}); err != nil {
			return err
		}
		if n != len(r.principals) {
			return errors.New("the principals in the store changed under this process: reopen and freeze again")
		}
		return t.Set(keyFreeze, row)
	})
	if err != nil {
		return err
	}
	r.frozen = true
	return nil
}

// Frozen reports whether the registry is frozen.
func (r *Registry) Frozen() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.frozen
}

// Tau is the strong-edge threshold: an edge of weight >= τ carries taint.
func (r *Registry) Tau() float64 { return r.tau }

// MaxApprovalTTL caps an approval's lifetime (expiry minus signing time).
func (r *Registry) MaxApprovalTTL() time.Duration { return r.maxTTL }

// CanApprove reports whether a principal holds approval authority: a
// user-tier principal registered as an approver, frozen so.
func (r *Registry) CanApprove(id string) bool {
	p, ok := r.Lookup(id)
	return ok && p.Approver && p.Tier == User && r.Frozen()
}

// FreezeDigest is the hex sha256 of the freeze record (the bytes of
// registry.freeze beside the store): pinned outside the data directory, it
// anchors every principal, τ, the approval cap and the operator key. It is
// "" before freeze.
func (r *Registry) FreezeDigest() (string, error) {
	rec, err := r.FreezeRecord()
	if err != nil || rec == nil {
		return "", err
	}
	s := sha256.Sum256(rec)
	return hex.EncodeToString(s[:]), nil
}

// OperatorKey is the public half of the operator key.
func (r *Registry) OperatorKey() ed25519.PublicKey { return r.operator }

// Lookup returns the principal with that ID.
func (r *Registry) Lookup(id string) (Principal, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.principals[id]
	return p, ok
}

// Verifier returns the verifier of a registered principal.
func (r *Registry) Verifier(id string) (*Verifier, Principal, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.principals[id]
	if !ok {
		return nil, Principal{}, fmt.Errorf("%w %q", ErrUnknownPrincipal, id)
	}
	return r.verifiers[id], p, nil
}

// List returns the principals in ID order.
func (r *Registry) List() []Principal {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Principal, 0, len(r.principals))
	for _, id := range r.sortedIDs() {
		out = append(out, r.principals[id])
	}
	return out
}

// FreezeRecord returns the stored freeze record (manifest and operator
// signature), nil before freeze. The engine keeps a copy beside the store, so
// that deleting the record from the store does not silently thaw the registry.
func (r *Registry) FreezeRecord() ([]byte, error) {
	var b []byte
	err := r.db.View(func(t kv.Txn) error {
		var err error
		b, err = t.Get(keyFreeze)
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		return err
	})
	return b, err
}
