package registry

import (
	"strings"
	"testing"

	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
)

// TestSignEnvelopeMatchesWrapSigner holds SignEnvelope byte-equal to
// sigstore's DSSE wrapper (Ed25519 signatures are deterministic).
func TestSignEnvelopeMatchesWrapSigner(t *testing.T) {
	s, _, err := GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ typ, payload string }{
		{"application/vnd.pedigree.entry+json", `{"a":1}`},
		{"application/vnd.pedigree.entry+json", ""},
		{`type "with" <html> & \ chars`, "\x00\xff binary <&>"},
		{"t", ""},                             // shorter than the signature
		{strings.Repeat("long/type", 30), ""}, // longer than everything else
	} {
		got, err := s.SignEnvelope(c.typ, []byte(c.payload))
		if err != nil {
			t.Fatal(err)
		}
		want, err := sigdsse.WrapSigner(s.sv, c.typ).SignMessage(strings.NewReader(c.payload))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%q:\n got %s\nwant %s", c.typ, got, want)
		}
		v, err := NewVerifier(s.Public())
		if err != nil {
			t.Fatal(err)
		}
		if p, err := v.VerifyEnvelope(got, c.typ); err != nil || string(p) != c.payload {
			t.Fatalf("%q: does not verify: %v", c.typ, err)
		}
	}
}
