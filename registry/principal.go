package registry

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"regexp"
)

// Principal is who writes entries: an agent, a user, a tool. Its tier comes
// from here and nowhere else: an entry's tier is its signer's.
type Principal struct {
	ID   string
	Tier Tier
	// PublicKey is Ed25519 or ECDSA P-256 (see Algorithm).
	PublicKey PublicKey
	// Approver: the principal may approve denied calls. Given at
	// registration, only to a user-tier principal, and frozen with the
	// registry.
	Approver bool
}

// A principal ID is "kind:name".
//   - kind: a lowercase letter, then up to 31 of [a-z0-9_-] (agent, user, tool, ...)
//   - name: a letter or digit, then up to 127 of [A-Za-z0-9._@+-]
//
// No spaces, no slashes, no other colons: IDs appear in keys, logs, policy
// input and reasons, and must not be able to pose as one another.
var idPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}:[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

// ValidateID checks a principal ID against the character set above.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w %q: want kind:name, kind of [a-z0-9_-] starting with a letter, name of [A-Za-z0-9._@+-]", ErrBadID, id)
	}
	return nil
}

// KeyFingerprint is the hex sha256 of the raw public key for Ed25519, of
// its DER SubjectPublicKeyInfo for ECDSA P-256; "" for a key of neither
// (or an Ed25519 key of the wrong length).
func KeyFingerprint(pub PublicKey) string {
	alg, err := Algorithm(pub)
	if err != nil {
		return ""
	}
	b, _ := pub.(ed25519.PublicKey)
	if alg == AlgECDSAP256 {
		b, _ = x509.MarshalPKIXPublicKey(pub)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
