package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// TestForgedPrivateKeyRefused: an ed25519.PrivateKey is seed‖public key;
// one made of mallory's seed and alice's public key would make a Signer
// whose Public() claims alice while it signs as mallory.
func TestForgedPrivateKeyRefused(t *testing.T) {
	_, alice, _ := registry.GenerateSigner(nil)
	_, mallory, _ := registry.GenerateSigner(nil)
	forged := append(append(ed25519.PrivateKey{}, mallory.Seed()...), alice[32:]...)
	if _, err := registry.NewSigner(forged); !errors.Is(err, registry.ErrBadKey) {
		t.Fatalf("forged key: got %v, want ErrBadKey", err)
	}
	if _, err := registry.NewSigner(alice[:40]); !errors.Is(err, registry.ErrBadKey) {
		t.Fatalf("short key: got %v, want ErrBadKey", err)
	}
	if _, err := registry.NewSigner(alice); err != nil {
		t.Fatal(err)
	}
}

// TestPrivateKeyFileMode: as ssh does, a private key file that group or
// others may read is refused, with a message naming the mode.
func TestPrivateKeyFileMode(t *testing.T) {
	dir := t.TempDir()
	_, priv, _ := registry.GenerateSigner(nil)
	path := filepath.Join(dir, "k.key")
	if err := registry.WritePrivateKeyFile(path, priv); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.LoadSigner(path); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o602} {
		os.Chmod(path, mode)
		_, err := registry.LoadSigner(path)
		if !errors.Is(err, registry.ErrKeyFileMode) || !errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), fmt.Sprintf("mode %04o", mode)) {
			t.Errorf("mode %04o: got %v, want a refusal naming the mode", mode, err)
		}
	}
	os.Chmod(path, 0o400)
	if _, err := registry.LoadSigner(path); err != nil {
		t.Fatalf("mode 0400: %v", err)
	}
}

// TestOneKeyOnePrincipal: a public key already registered for another
// principal, or the operator's, is refused at registration.
func TestOneKeyOnePrincipal(t *testing.T) {
	ctx := context.Background()
	op, _, _ := registry.GenerateSigner(nil)
	e, err := pedigree.NewInMemory(ctx, 0.5, op)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	alice, _, _ := registry.GenerateSigner(nil)
	if err := e.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: "user:alice", Tier: registry.User, PublicKey: alice.Public()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []registry.Principal{
		{ID: "agent:planner", Tier: registry.Internal, PublicKey: alice.Public()},
		{ID: "tool:mail", Tier: registry.External, PublicKey: alice.Public()},
		{ID: "agent:op", Tier: registry.Internal, PublicKey: op.Public()},
	} {
		err := e.Bootstrap().AddPrincipal(ctx, p)
		if !errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), "a key of its own") {
			t.Errorf("%s: got %v, want a refusal", p.ID, err)
		}
		if _, ok := hatch.Registry(e).Lookup(p.ID); ok {
			t.Errorf("%s was registered", p.ID)
		}
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		t.Fatal(err)
	}
	// The one principal signs as itself.
	if _, err := e.Record(ctx, alice, pedigree.Entry{Principal: "user:alice", Kind: lineage.KindPrompt, Session: "s", Content: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
}

// TestSharedKeyRefusedAtOpen: a store registered before one key for two
// principals was refused (written here through AddUnchecked) is refused when
// it is loaded, frozen or not, and so is a principal holding the operator
// key.
func TestSharedKeyRefusedAtOpen(t *testing.T) {
	ctx := t.Context()
	op, _, _ := registry.GenerateSigner(nil)
	alice, _, _ := registry.GenerateSigner(nil)
	cases := []struct {
		name   string
		shared registry.Principal
		want   string
	}{
		{"a user's key for an internal agent", registry.Principal{ID: "agent:planner", Tier: registry.Internal, PublicKey: alice.Public()}, "agent:planner and user:alice hold one public key"},
		{"the operator key for a principal", registry.Principal{ID: "agent:op", Tier: registry.Internal, PublicKey: op.Public()}, "the operator and agent:op hold one public key"},
	}
	for _, c := range cases {
		for _, freeze := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, frozen %v", c.name, freeze), func(t *testing.T) {
				db, err := store.Create(t.TempDir(), store.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if err := registry.Bootstrap(ctx, db.Space(store.Registry), 0.5, op.Public().(ed25519.PublicKey), time.Now()); err != nil {
					t.Fatal(err)
				}
				reg, err := registry.Load(db.Space(store.Registry))
				if err != nil {
					t.Fatal(err)
				}
				if err := reg.Add(ctx, registry.Principal{ID: "user:alice", Tier: registry.User, PublicKey: alice.Public()}); err != nil {
					t.Fatal(err)
				}
				if err := reg.AddUnchecked(ctx, c.shared); err != nil {
					t.Fatal(err)
				}
				if freeze {
					if err := reg.Freeze(ctx, op, time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				_, err = registry.Load(db.Space(store.Registry))
				if !errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("load: got %v, want a refusal saying %q", err, c.want)
				}
			})
		}
	}
}

// TestPublicKeyFile: a public key file (the trust root, an exported key)
// reads back as the key, is world-readable, and is never overwritten.
func TestPublicKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "op.pub")
	a, _, _ := registry.GenerateSigner(nil)
	b, _, _ := registry.GenerateSigner(nil)
	if err := registry.WritePublicKeyFile(path, a.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	if err := registry.WritePublicKeyFile(path, b.Public().(ed25519.PublicKey)); !errors.Is(err, os.ErrExist) {
		t.Fatalf("overwrite: %v", err)
	}
	got, err := registry.LoadPublicKey(path)
	if err != nil || !got.Equal(a.Public()) {
		t.Fatalf("read back %x, %v; want the first key", got, err)
	}
	if err := registry.WritePublicKeyFile(filepath.Join(t.TempDir(), "short.pub"), a.Public().(ed25519.PublicKey)[:31]); err == nil {
		t.Fatal("a 31-byte public key was written")
	}
}

// TestKeyFileSizeLimit: a key file is read up to its limit and refused past
// it (a key path pointed at a large file or a device is not read whole).
func TestKeyFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := registry.GenerateSigner(nil)
	pemBytes, _ := registry.MarshalPublicKey(s.Public().(ed25519.PublicKey))
	const limit = 64 << 10
	for _, c := range []struct {
		size int
		ok   bool
	}{{limit, true}, {limit + 1, false}, {4 * limit, false}} {
		path := filepath.Join(dir, fmt.Sprint(c.size))
		padded := append(bytes.Clone(pemBytes), bytes.Repeat([]byte("\n"), c.size-len(pemBytes))...)
		if err := os.WriteFile(path, padded, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := registry.LoadPublicKey(path)
		switch {
		case c.ok && (err != nil || !got.Equal(s.Public())):
			t.Errorf("%d bytes: %v", c.size, err)
		case !c.ok && (!errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), "larger than 65536 bytes")):
			t.Errorf("%d bytes: got %v, want a refusal naming the limit", c.size, err)
		}
	}
}
