package registry_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

func TestTiers(t *testing.T) {
	for _, name := range []string{"internal", "user", "unverified", "external"} {
		tier, err := registry.ParseTier(name)
		if err != nil || tier.String() != name {
			t.Errorf("ParseTier(%q) = %v, %v", name, tier, err)
		}
	}
	if _, err := registry.ParseTier("admin"); !errors.Is(err, registry.ErrBadTier) {
		t.Errorf("ParseTier(admin): %v", err)
	}
	if registry.Max(registry.User, registry.External) != registry.External || registry.Max(registry.Internal, registry.User) != registry.User {
		t.Error("Max is not 'least trusted'")
	}
	if !registry.User.Trusted() || registry.Unverified.Trusted() {
		t.Error("Trusted")
	}
}

// TestTierNames: only the four names parse, in a catalog, a principal row
// or a flag; the empty name is not the zero tier.
func TestTierNames(t *testing.T) {
	for _, bad := range []string{"", "Internal", "tier(0)", "internal "} {
		if tier, err := registry.ParseTier(bad); !errors.Is(err, registry.ErrBadTier) {
			t.Errorf("ParseTier(%q) = %v, %v", bad, tier, err)
		}
		var tier registry.Tier
		if b, _ := json.Marshal(bad); json.Unmarshal(b, &tier) == nil {
			t.Errorf("the JSON tier %s decoded as %v", b, tier)
		}
	}
}

// TestTauBounds: τ is in (0, 1]: 1 (only full-weight edges carry taint) is
// a threshold, 0 (every edge, however weak) is not.
func TestTauBounds(t *testing.T) {
	for _, tau := range []float64{1, 0.5, 1e-9} {
		if err := registry.ValidateTau(tau); err != nil {
			t.Errorf("τ=%v: %v", tau, err)
		}
	}
	for _, tau := range []float64{0, -0.5, 1.0000001, 2, math.NaN(), math.Inf(1)} {
		if err := registry.ValidateTau(tau); !errors.Is(err, registry.ErrBadTau) {
			t.Errorf("τ=%v accepted: %v", tau, err)
		}
	}
}

// TestApprovalCapRow: the approval cap fixed at bootstrap is the one a
// reopened registry enforces, and a meta row whose cap was edited to
// nothing, zero or a negative lifetime is refused at load.
func TestApprovalCapRow(t *testing.T) {
	ctx := t.Context()
	op, _, _ := registry.GenerateSigner(nil)
	open := func(t *testing.T, c registry.Config) *store.DB {
		db, err := store.Create(t.TempDir(), store.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := registry.BootstrapWith(ctx, db.Space(store.Registry), c, time.Now()); err != nil {
			t.Fatal(err)
		}
		return db
	}
	for _, c := range []struct {
		set, want time.Duration
	}{{time.Hour, time.Hour}, {0, registry.DefaultMaxApprovalTTL}, {time.Nanosecond, time.Nanosecond}} {
		db := open(t, registry.Config{Tau: 0.5, Operator: op.Public().(ed25519.PublicKey), MaxApprovalTTL: c.set})
		reg, err := registry.Load(db.Space(store.Registry))
		if err != nil || reg.MaxApprovalTTL() != c.want {
			t.Errorf("cap %s at bootstrap: loaded %v, %v; want %s", c.set, reg.MaxApprovalTTL(), err, c.want)
		}
	}
	db, err := store.Create(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := registry.BootstrapWith(ctx, db.Space(store.Registry), registry.Config{Tau: 0.5, Operator: op.Public().(ed25519.PublicKey), MaxApprovalTTL: -time.Hour}, time.Now()); !errors.Is(err, registry.ErrBadTTL) {
		t.Errorf("a negative cap at bootstrap: %v", err)
	}
	for _, edited := range []string{`""`, `"0s"`, `"-1h0m0s"`, `"forever"`} {
		db := open(t, registry.Config{Tau: 0.5, Operator: op.Public().(ed25519.PublicKey), MaxApprovalTTL: time.Hour})
		err := db.Commit(ctx, 0, func(tx *store.Txn) error {
			b, _ := tx.Get([]byte("reg/meta"))
			return tx.Set([]byte("reg/meta"), []byte(strings.Replace(string(b), `"1h0m0s"`, edited, 1)))
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := registry.Load(db.Space(store.Registry)); !errors.Is(err, registry.ErrBadTTL) {
			t.Errorf("cap edited to %s: %v", edited, err)
		}
	}
}

func TestValidateID(t *testing.T) {
	for _, ok := range []string{"user:alice", "agent:planner", "tool:gmail_read", "tool:AugustSmartLockGrantGuestAccess", "user:a.b@c+d-e"} {
		if err := registry.ValidateID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "alice", ":alice", "user:", "User:alice", "user:al ice", "user:a:b", "user:a/b", "user:-a", "1user:a", "user:" + strings.Repeat("a", 129), "user:ä"} {
		if err := registry.ValidateID(bad); !errors.Is(err, registry.ErrBadID) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestFrozenAfterRestart freezes, closes, reopens, and tries to change the
// registry through every path the library has.
func TestFrozenAfterRestart(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if !hatch.Registry(w.E).Frozen() {
		t.Fatal("not frozen after reopen")
	}
	s, _, _ := registry.GenerateSigner(nil)
	p := registry.Principal{ID: "user:eve", Tier: registry.Internal, PublicKey: s.Public()}
	if err := w.E.Bootstrap().AddPrincipal(ctx, p); !errors.Is(err, registry.ErrFrozen) {
		t.Errorf("engine AddPrincipal: %v", err)
	}
	if err := hatch.Registry(w.E).Add(ctx, p); !errors.Is(err, registry.ErrFrozen) {
		t.Errorf("registry Add: %v", err)
	}
	if err := w.E.Bootstrap().Freeze(ctx, w.Operator); !errors.Is(err, registry.ErrFrozen) {
		t.Errorf("second freeze: %v", err)
	}
	// A registry value loaded before the freeze (another process's stale
	// view) cannot add either: the store is the authority.
	w.E.Close()
	w.E = nil
	db, err := store.Open(w.Dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Load(db.Space(store.Registry))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(t.Context(), p); !errors.Is(err, registry.ErrFrozen) {
		t.Errorf("Load then Add: %v", err)
	}
	db.Close()
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, ok := hatch.Registry(w.E).Lookup("user:eve"); ok {
		t.Fatal("user:eve was registered after freeze")
	}
}

func TestStaleViewCannotAdd(t *testing.T) {
	// Process A loads the registry; process B freezes; A's Add must fail.
	dir := t.TempDir()
	db, err := store.Create(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op, _, _ := registry.GenerateSigner(nil)
	if err := registry.Bootstrap(t.Context(), db.Space(store.Registry), 0.5, op.Public().(ed25519.PublicKey), time.Now()); err != nil {
		t.Fatal(err)
	}
	a, _ := registry.Load(db.Space(store.Registry))
	b, _ := registry.Load(db.Space(store.Registry))
	if err := b.Freeze(t.Context(), op, time.Now()); err != nil {
		t.Fatal(err)
	}
	s, _, _ := registry.GenerateSigner(nil)
	if err := a.Add(t.Context(), registry.Principal{ID: "user:late", Tier: registry.User, PublicKey: s.Public()}); !errors.Is(err, registry.ErrFrozen) {
		t.Fatalf("stale view added after freeze: %v", err)
	}
}

func TestFreezeNeedsTheOperatorKey(t *testing.T) {
	dir := t.TempDir()
	db, _ := store.Create(dir, store.Options{})
	defer db.Close()
	op, _, _ := registry.GenerateSigner(nil)
	registry.Bootstrap(t.Context(), db.Space(store.Registry), 0.5, op.Public().(ed25519.PublicKey), time.Now())
	reg, _ := registry.Load(db.Space(store.Registry))
	other, _, _ := registry.GenerateSigner(nil)
	if err := reg.Freeze(t.Context(), other, time.Now()); !errors.Is(err, registry.ErrBadKey) || reg.Frozen() {
		t.Fatalf("freeze with another key: %v", err)
	}
}

// TestTamperedRegistryRefused edits principal rows behind the engine's back.
func TestTamperedRegistryRefused(t *testing.T) {
	row := func(id, tier string, key registry.PublicKey) []byte {
		pemBytes, _ := registry.MarshalPrincipalKey(key)
		b, _ := json.Marshal(map[string]string{"id": id, "tier": tier, "public_key": string(pemBytes)})
		return b
	}
	cases := []struct {
		name string
		fn   func(w *enginetest.World, tx *store.Txn) error
		want string
	}{
		{"tier raised", func(w *enginetest.World, tx *store.Txn) error {
			return tx.Set([]byte("reg/p/tool:gmail_read"), row("tool:gmail_read", "internal", w.Keys["tool:gmail_read"].Public()))
		}, "principal tool:gmail_read has tier internal, frozen as external"},
		{"approval authority given", func(w *enginetest.World, tx *store.Txn) error {
			pemBytes, _ := registry.MarshalPrincipalKey(w.Keys["user:mallory"].Public())
			b, _ := json.Marshal(map[string]any{"id": "user:mallory", "tier": "user", "public_key": string(pemBytes), "approver": true})
			return tx.Set([]byte("reg/p/user:mallory"), b)
		}, "principal user:mallory has approval authority true, frozen as false"},
		{"approval authority taken", func(w *enginetest.World, tx *store.Txn) error {
			return tx.Set([]byte("reg/p/user:alice"), row("user:alice", "user", w.Keys["user:alice"].Public()))
		}, "principal user:alice has approval authority false, frozen as true"},
		{"key swapped", func(w *enginetest.World, tx *store.Txn) error {
			s, _, _ := registry.GenerateSigner(nil)
			return tx.Set([]byte("reg/p/user:alice"), row("user:alice", "user", s.Public()))
		}, "principal user:alice has a different public key"},
		{"principal added", func(w *enginetest.World, tx *store.Txn) error {
			s, _, _ := registry.GenerateSigner(nil)
			return tx.Set([]byte("reg/p/user:eve"), row("user:eve", "internal", s.Public()))
		}, "principal user:eve was added after freeze"},
		{"principal removed", func(w *enginetest.World, tx *store.Txn) error {
			return tx.Delete([]byte("reg/p/user:mallory"))
		}, "principal user:mallory was removed"},
		{"tau changed", func(w *enginetest.World, tx *store.Txn) error {
			b, _ := tx.Get([]byte("reg/meta"))
			return tx.Set([]byte("reg/meta"), []byte(strings.Replace(string(b), `"tau":0.5`, `"tau":0.99`, 1)))
		}, "tau is 0.99, frozen as 0.5"},
		{"freeze record forged", func(w *enginetest.World, tx *store.Txn) error {
			b, _ := tx.Get([]byte("reg/freeze"))
			var fr map[string][]byte
			json.Unmarshal(b, &fr)
			fr["manifest"] = []byte(strings.Replace(string(fr["manifest"]), `"external"`, `"internal"`, 1))
			out, _ := json.Marshal(fr)
			return tx.Set([]byte("reg/freeze"), out)
		}, "signature does not verify"},
		{"a row's keys in another case", func(w *enginetest.World, tx *store.Txn) error {
			// encoding/json would read it as the same principal.
			b, _ := tx.Get([]byte("reg/p/user:alice"))
			return tx.Set([]byte("reg/p/user:alice"), []byte(strings.Replace(string(b), `"tier"`, `"TIER"`, 1)))
		}, `principal row "p/user:alice" is not in the form pedigree writes`},
		{"freeze record deleted", func(w *enginetest.World, tx *store.Txn) error {
			return tx.Delete([]byte("reg/freeze"))
		}, "registry.freeze exists but the store has no freeze record"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := enginetest.NewOnDisk(t, enginetest.Default)
			w.Tamper(func(tx *store.Txn) error { return c.fn(w, tx) })
			err := w.Reopen()
			var te *registry.TamperError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a TamperError saying %q", err, c.want)
			}
		})
	}
}

func TestDeletedFreezeWithEntriesRefused(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.Record("user:alice", "s", "x", nil)
	w.Tamper(func(tx *store.Txn) error { return tx.Delete([]byte("reg/freeze")) })
	if err := os.Remove(filepath.Join(w.Dir, pedigree.FreezeFile)); err != nil {
		t.Fatal(err)
	}
	var te *registry.TamperError
	if err := w.Reopen(); !errors.As(err, &te) || !strings.Contains(err.Error(), "holds entries but no freeze record") {
		t.Fatalf("got %v", err)
	}
}
