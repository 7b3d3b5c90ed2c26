package registry_test

import (
	"crypto/ecdsa"
	"errors"
	"testing"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/kmstest"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/aws"
)

// TestAWSSigner: a P-256 key in AWS KMS (local-kms, reached through
// AWS_ENDPOINT_URL_KMS) signs entries' envelopes that verify in process.
func TestAWSSigner(t *testing.T) {
	kmstest.StartLocalKMS(t)
	ref := kmstest.CreateAWSKey(t, "alias/pedigree-alice")
	s, err := registry.OpenSigner(t.Context(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Public().(*ecdsa.PublicKey); !ok {
		t.Fatalf("an AWS key is %T", s.Public())
	}
	env, err := s.SignEnvelope("application/test", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := registry.NewVerifier(s.Public())
	if p, err := v.VerifyEnvelope(env, "application/test"); err != nil || string(p) != `{"a":1}` {
		t.Fatalf("envelope: %v", err)
	}
	if _, err := s.Ed25519(); !errors.Is(err, registry.ErrBadKey) {
		t.Fatal("an AWS key passed as an operator key")
	}
	if _, err := registry.OpenSigner(t.Context(), "awskms:///alias/nobody", 0); !errors.Is(err, registry.ErrKMS) {
		t.Fatalf("an unknown alias: %v", err)
	}
}
