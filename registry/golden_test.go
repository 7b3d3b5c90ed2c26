package registry_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/registry"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestFreezeRecordGolden pins the bytes the operator signs at freeze (the
// manifest, its digest over every principal, τ, the approval cap and the
// operator key) and the record kept in registry.freeze. A change here makes
// every frozen store refuse to open: regenerate with -update only on
// purpose, with a new manifest version. τ has two digits, so that a change
// in how it is written into the digest shows.
func TestFreezeRecordGolden(t *testing.T) {
	key := func(b byte) *registry.Signer {
		s, err := registry.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	db, err := store.Create(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op := key(1)
	if err := registry.BootstrapWith(ctx, db.Space(store.Registry), registry.Config{Tau: 0.65, Operator: op.Public().(ed25519.PublicKey), MaxApprovalTTL: 90 * time.Minute}, at); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Load(db.Space(store.Registry))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []registry.Principal{
		{ID: "user:alice", Tier: registry.User, Approver: true},
		{ID: "agent:planner", Tier: registry.Internal},
		{ID: "tool:gmail_read", Tier: registry.External},
	} {
		p.PublicKey = key(byte(2 + i)).Public()
		if err := reg.Add(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := reg.FreezeDigest(); err != nil || d != "" {
		t.Fatalf("the freeze digest before freeze: %q %v", d, err)
	}
	if err := reg.Freeze(ctx, op, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := reg.FreezeRecord()
	if err != nil {
		t.Fatal(err)
	}
	// The digest pinned outside the directory is the record's sha256.
	sum := sha256.Sum256(got)
	if d, err := reg.FreezeDigest(); err != nil || d != hex.EncodeToString(sum[:]) {
		t.Fatalf("the freeze digest: %q %v, want %x", d, err, sum)
	}
	path := filepath.Join("..", "testdata", "registry", "freeze.golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the freeze record changed:\n got %s\nwant %s", got, want)
	}
	if _, err := registry.Load(db.Space(store.Registry)); err != nil {
		t.Fatalf("the golden registry does not load: %v", err)
	}
}
