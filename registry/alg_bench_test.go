package registry

import (
	"crypto/ecdsa"
	"crypto/rand"
	"testing"
)

// BenchmarkVerifyEnvelope is the per-entry verification a check pays for
// each principal's signature: Ed25519 against ECDSA P-256 (SHA-256), through
// the same DSSE envelope path (go test -bench VerifyEnvelope -benchmem ./registry).
func BenchmarkVerifyEnvelope(b *testing.B) {
	payload := []byte(`{"principal":"user:alice","session":"s1","kind":"approval","content":"send_money 999"}`)
	const typ = "application/vnd.pedigree.entry+json"
	ed, _, _ := GenerateSigner(nil)
	ec, _ := ecdsa.GenerateKey(p256Curve(), rand.Reader)
	for _, c := range []struct {
		name string
		pub  PublicKey
		sign func([]byte) ([]byte, error)
	}{
		{"ed25519", ed.Public(), ed.Sign},
		{"ecdsa-p256", &ec.PublicKey, func(m []byte) ([]byte, error) { return ecdsa.SignASN1(rand.Reader, ec, sha256Of(m)) }},
	} {
		env := envelopeFor(b, typ, payload, c.sign)
		v, err := newVerifier(c.pub)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyEnvelope(env, typ); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
