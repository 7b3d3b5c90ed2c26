package registry_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/kmstest"
	"github.com/sigstore/sigstore/pkg/signature"
	sigkms "github.com/sigstore/sigstore/pkg/signature/kms"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/fake"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/hashivault"
)

func vault(t *testing.T) *kmstest.Vault {
	t.Helper()
	v := kmstest.NewVault("s.test-token")
	t.Cleanup(v.Close)
	t.Setenv("VAULT_ADDR", v.URL)
	t.Setenv("VAULT_TOKEN", v.Token)
	return v
}

// TestVaultSigner: keys in Vault Transit sign as file keys do: an Ed25519
// key signs the message itself (a signature the Ed25519 verifier and the
// DSSE envelope check accept), a P-256 key signs its SHA-256.
func TestVaultSigner(t *testing.T) {
	v := vault(t)
	edPub := v.AddKey("operator", "ed25519")
	ecPub := v.AddKey("alice", "ecdsa-p256")
	for _, c := range []struct {
		ref string
		pub crypto.PublicKey
		alg string
	}{
		{"hashivault://operator", edPub, registry.AlgEd25519},
		{"hashivault://alice", ecPub, registry.AlgECDSAP256},
	} {
		s, err := registry.OpenSigner(t.Context(), c.ref, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.ref, err)
		}
		if !s.Public().Equal(c.pub) {
			t.Fatalf("%s: public key is not Vault's", c.ref)
		}
		if alg, _ := registry.Algorithm(s.Public()); alg != c.alg {
			t.Fatalf("%s: algorithm %s", c.ref, alg)
		}
		msg := []byte("freeze manifest")
		sig, err := s.Sign(msg)
		if err != nil {
			t.Fatalf("%s: sign: %v", c.ref, err)
		}
		vf, _ := registry.NewVerifier(s.Public())
		if err := vf.Verify(sig, msg); err != nil {
			t.Fatalf("%s: signature does not verify: %v", c.ref, err)
		}
		if k, ok := c.pub.(ed25519.PublicKey); ok && !ed25519.Verify(k, msg, sig) {
			t.Fatalf("%s: not a plain Ed25519 signature of the message", c.ref)
		}
		env, err := s.SignEnvelope("application/test", []byte(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if p, err := vf.VerifyEnvelope(env, "application/test"); err != nil || string(p) != `{"a":1}` {
			t.Fatalf("%s: envelope: %v", c.ref, err)
		}
		_, err = s.Ed25519()
		if (err == nil) != (c.alg == registry.AlgEd25519) {
			t.Fatalf("%s: Ed25519() = %v", c.ref, err)
		}
	}
	if n := v.Signs.Load(); n != 4 {
		t.Fatalf("Vault made %d signatures, want 4", n)
	}
}

// TestVaultUnreachableOrRefusing: a wrong token, an unknown key, a Vault
// that does not answer: each is its own error, in bounded time.
func TestVaultUnreachableOrRefusing(t *testing.T) {
	v := vault(t)
	v.AddKey("alice", "ecdsa-p256")
	t.Setenv("VAULT_TOKEN", "s.wrong")
	if _, err := registry.OpenSigner(t.Context(), "hashivault://alice", 0); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("wrong token: %v", err)
	}
	t.Setenv("VAULT_TOKEN", v.Token)
	if _, err := registry.OpenSigner(t.Context(), "hashivault://bob", 0); !errors.Is(err, registry.ErrKMS) {
		t.Fatalf("unknown key: %v", err)
	}
	s, err := registry.OpenSigner(t.Context(), "hashivault://alice", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Silence()()
	start := time.Now()
	if _, err := s.Sign([]byte("x")); !errors.Is(err, registry.ErrKMSTimeout) {
		t.Fatalf("a Vault that does not answer: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
}

// stuckProvider never answers and ignores its context; liar signs with a
// key that is not the one it reports.
func init() {
	sigkms.AddProvider("stuckkms://", func(context.Context, string, crypto.Hash, ...signature.RPCOption) (sigkms.SignerVerifier, error) {
		select {}
	})
	sigkms.AddProvider("failkms://", func(context.Context, string, crypto.Hash, ...signature.RPCOption) (sigkms.SignerVerifier, error) {
		return nil, errors.New("the KMS is down")
	})
	sigkms.AddProvider("rsakms://", func(ctx context.Context, _ string, hf crypto.Hash, _ ...signature.RPCOption) (sigkms.SignerVerifier, error) {
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			return nil, err
		}
		return rsaKey{pub: &k.PublicKey}, nil
	})
	sigkms.AddProvider("liarkms://", func(ctx context.Context, _ string, hf crypto.Hash, _ ...signature.RPCOption) (sigkms.SignerVerifier, error) {
		shown, err := sigkms.Get(ctx, "fakekms://shown", hf)
		if err != nil {
			return nil, err
		}
		used, err := sigkms.Get(ctx, "fakekms://used", hf)
		if err != nil {
			return nil, err
		}
		return liar{SignerVerifier: shown, used: used}, nil
	})
}

// rsaKey is a KMS key of an algorithm a principal may not hold.
type rsaKey struct {
	sigkms.SignerVerifier
	pub *rsa.PublicKey
}

func (k rsaKey) PublicKey(...signature.PublicKeyOption) (crypto.PublicKey, error) { return k.pub, nil }

type liar struct {
	sigkms.SignerVerifier
	used sigkms.SignerVerifier
}

func (l liar) SignMessage(m io.Reader, opts ...signature.SignOption) ([]byte, error) {
	return l.used.SignMessage(m, opts...)
}

func TestKMSFailsClosed(t *testing.T) {
	start := time.Now()
	if _, err := registry.OpenSigner(t.Context(), "stuckkms://k", 200*time.Millisecond); !errors.Is(err, registry.ErrKMSTimeout) {
		t.Fatalf("a provider that never answers: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	if _, err := registry.OpenSigner(t.Context(), "failkms://k", 0); !errors.Is(err, registry.ErrKMS) || errors.Is(err, registry.ErrKMSTimeout) || !strings.Contains(err.Error(), "the KMS is down") {
		t.Fatalf("a provider that fails: %v", err)
	}
	s, err := registry.OpenSigner(t.Context(), "liarkms://k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign([]byte("x")); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a signature by another key was handed out: %v", err)
	}
	if _, err := registry.OpenSigner(t.Context(), "rsakms://k", 0); !errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), "rsakms://k") {
		t.Fatalf("an RSA key in a KMS: %v", err)
	}
	if _, err := registry.OpenSigner(t.Context(), "nosuch-kms://k", 0); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "no kms provider") {
		t.Fatalf("an unknown scheme: %v", err)
	}
	// fakekms holds a P-256 key: a KMS principal of the kind AWS gives.
	f, err := registry.OpenSigner(t.Context(), "fakekms://alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Public().(*ecdsa.PublicKey); !ok {
		t.Fatalf("fakekms key is %T", f.Public())
	}
	if _, err := f.Sign([]byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestIsKMSRef(t *testing.T) {
	for ref, want := range map[string]bool{
		"hashivault://alice":               true,
		"awskms:///arn:aws:kms:eu:1:key/k": true,
		"fakekms://x":                      true,
		"openbao://k":                      true,
		"/home/a/alice.key":                false,
		"alice.key":                        false,
		"./hashivault://alice":             false,
		"C://x":                            false,
		"hashivault:/alice":                false,
		"":                                 false,
	} {
		if registry.IsKMSRef(ref) != want {
			t.Errorf("IsKMSRef(%q) = %v", ref, !want)
		}
	}
}

// TestLoadPrincipalKey: a principal's public key file may be P-256.
func TestLoadPrincipalKey(t *testing.T) {
	f, err := registry.OpenSigner(t.Context(), "fakekms://k", 0)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := registry.MarshalPrincipalKey(f.Public())
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/k.pub"
	os.WriteFile(path, pemBytes, 0o644)
	if got, err := registry.LoadPrincipalKey(path); err != nil || !got.Equal(f.Public()) {
		t.Fatalf("LoadPrincipalKey = %v", err)
	}
	if _, err := registry.LoadPrincipalKey(path + ".missing"); !errors.Is(err, registry.ErrBadKey) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := registry.LoadPublicKey(path); !errors.Is(err, registry.ErrBadKey) {
		t.Fatalf("LoadPublicKey (Ed25519 only) read a P-256 key: %v", err)
	}
}

// TestOpenSignerFile: a path opens as LoadSigner does.
func TestOpenSignerFile(t *testing.T) {
	s, priv, _ := registry.GenerateSigner(nil)
	path := t.TempDir() + "/k.key"
	if err := registry.WritePrivateKeyFile(path, priv); err != nil {
		t.Fatal(err)
	}
	got, err := registry.OpenSigner(t.Context(), path, 0)
	if err != nil || !got.Public().Equal(s.Public()) {
		t.Fatalf("OpenSigner(file) = %v", err)
	}
	if _, err := registry.OpenSigner(t.Context(), path+".missing", 0); !errors.Is(err, registry.ErrBadKey) || errors.Is(err, registry.ErrKMS) {
		t.Fatalf("missing file: %v", err)
	}
}

// BenchmarkSign: what one signature costs with each kind of key, measured
// in one sitting (go test -run XXX -bench 'Sign$' -benchmem ./registry):
// a file key signs in process; fakekms holds a P-256 key in process behind
// the KMS path (its goroutine, its deadline, the check against the public
// key); Vault Transit (the httptest engine on loopback), local-kms (AWS KMS's
// API on loopback) and Cloud KMS (gRPC on loopback) are the floor of a
// real round trip; softhsm2 is a real PKCS#11 module, in process. local-kms
// and softhsm2 are skipped when not installed.
func BenchmarkSign(b *testing.B) {
	msg := []byte("approval statement")
	run := func(b *testing.B, s *registry.Signer) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Sign(msg); err != nil {
				b.Fatal(err)
			}
		}
	}
	open := func(b *testing.B, ref string) *registry.Signer {
		s, err := registry.OpenSigner(b.Context(), ref, 0)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("file-ed25519", func(b *testing.B) {
		s, _, _ := registry.GenerateSigner(nil)
		run(b, s)
	})
	// No principal's key file is P-256 (a file key is Ed25519): this is
	// what P-256 signing costs in process, the floor under every P-256 row.
	b.Run("inprocess-ecdsa-p256", func(b *testing.B) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		b.ReportAllocs()
		for b.Loop() {
			h := sha256.Sum256(msg)
			if _, err := ecdsa.SignASN1(rand.Reader, k, h[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fakekms-ecdsa-p256", func(b *testing.B) { run(b, open(b, "fakekms://bench")) })
	for _, c := range []struct{ name, key, typ string }{{"vault-ed25519", "ed", "ed25519"}, {"vault-ecdsa-p256", "ec", "ecdsa-p256"}} {
		b.Run(c.name, func(b *testing.B) {
			v := kmstest.NewVault("s.bench")
			defer v.Close()
			b.Setenv("VAULT_ADDR", v.URL)
			b.Setenv("VAULT_TOKEN", v.Token)
			v.AddKey(c.key, c.typ)
			run(b, open(b, "hashivault://"+c.key))
		})
	}
	b.Run("localkms-ecdsa-p256", func(b *testing.B) {
		kmstest.StartLocalKMS(b)
		run(b, open(b, kmstest.CreateAWSKey(b, "alias/bench")))
	})
	b.Run("gcp-ecdsa-p256", func(b *testing.B) {
		g := kmstest.StartGCP(b)
		run(b, open(b, g.AddKey(b, "bench")))
	})
	b.Run("softhsm2-ecdsa-p256", func(b *testing.B) {
		tk := kmstest.SoftHSM(b, "bench")
		run(b, open(b, tk.CreateKey(b, "bench")))
	})
}
