package registry_test

import (
	"crypto/ecdsa"
	"errors"
	"testing"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/kmstest"
)

// TestGCPSigner: a P-256 key in Cloud KMS (sigstore's gcpkms:// client, the
// real one, against KeyManagementService over gRPC on loopback) signs
// entries' envelopes that verify in process; an unknown key is refused.
func TestGCPSigner(t *testing.T) {
	g := kmstest.StartGCP(t)
	ref := g.AddKey(t, "alice")
	s, err := registry.OpenSigner(t.Context(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Public().(*ecdsa.PublicKey); !ok {
		t.Fatalf("a GCP key is %T", s.Public())
	}
	env, err := s.SignEnvelope("application/test", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := registry.NewVerifier(s.Public())
	if p, err := v.VerifyEnvelope(env, "application/test"); err != nil || string(p) != `{"a":1}` {
		t.Fatalf("envelope: %v", err)
	}
	if g.Signs.Load() != 1 {
		t.Fatalf("Cloud KMS made %d signatures, want 1", g.Signs.Load())
	}
	if v1, err := registry.OpenSigner(t.Context(), ref+"/cryptoKeyVersions/1", 0); err != nil || !v1.Public().Equal(s.Public()) {
		t.Fatalf("an explicit version: %v", err)
	}
	if _, err := registry.OpenSigner(t.Context(), "gcpkms://projects/pedigree/locations/global/keyRings/test/cryptoKeys/nobody", 0); !errors.Is(err, registry.ErrKMS) {
		t.Fatalf("an unknown key: %v", err)
	}
}
