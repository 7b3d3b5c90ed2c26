package registry

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	ssldsse "github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
)

// PublicKey is a principal's public key: an ed25519.PublicKey (the
// default) or an ECDSA P-256 *ecdsa.PublicKey (what AWS KMS and most HSMs
// hold; they have no Ed25519). Algorithm says which, or refuses anything else.
type PublicKey interface {
	Equal(crypto.PublicKey) bool
}

// The algorithms a principal's key may have. The registry records the
// algorithm with the key (AlgEd25519 is the default and is not written, so
// a store made before P-256 reads as it did).
const (
	AlgEd25519   = "ed25519"
	AlgECDSAP256 = "ecdsa-p256"
)

// Algorithm names pub's algorithm; a nil key, a key of another type or
// curve, or an Ed25519 key of the wrong length is ErrBadKey.
func Algorithm(pub PublicKey) (string, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", fmt.Errorf("%w: an Ed25519 public key has %d bytes, not %d", ErrBadKey, ed25519.PublicKeySize, len(k))
		}
		return AlgEd25519, nil
	case *ecdsa.PublicKey:
		if k == nil || k.Curve != elliptic.P256() {
			return "", fmt.Errorf("%w: an ECDSA key must be on P-256", ErrBadKey)
		}
		return AlgECDSAP256, nil
	}
	return "", fmt.Errorf("%w: a %T; a principal's key is Ed25519 or ECDSA P-256", ErrBadKey, pub)
}

// maxKeyFile bounds what we read from a key file.
const maxKeyFile = 64 << 10

// Signer holds a principal's private key. It lives with whoever signs (the
// agent harness, a tool wrapper, the approval client), never in the store.
//
// A file key signs in process; a KMS key (OpenSigner with a KMS URI) signs
// through its provider, bounded in time, and is checked against its public
// key after every signature.
type Signer struct {
	sv  *signature.ED25519SignerVerifier // a file key: the hot path
	kms *kmsKey                          // a key in a KMS: sv is nil
	pub PublicKey
}

// NewSigner wraps an Ed25519 private key. The algorithm is pinned: the
// generic sigstore loaders would accept other key types.
//
// An ed25519.PrivateKey is seed‖public key, and signing uses both halves:
// a key whose public half is not the one its seed yields (someone's seed
// beside another's public key) is refused, so Public is the key that
// verifies what the signer signs.
func NewSigner(priv ed25519.PrivateKey) (*Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: an Ed25519 private key has %d bytes, not %d", ErrBadKey, ed25519.PrivateKeySize, len(priv))
	}
	derived := ed25519.NewKeyFromSeed(priv.Seed()).Public().(ed25519.PublicKey)
	if !derived.Equal(priv.Public()) {
		return nil, fmt.Errorf("%w: the private key's public half is not the one its seed yields", ErrBadKey)
	}
	sv, err := signature.LoadED25519SignerVerifier(priv)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, pub: priv.Public().(ed25519.PublicKey)}, nil
}

// GenerateSigner makes a new key from rnd (crypto/rand when nil).
func GenerateSigner(rnd io.Reader) (*Signer, ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return nil, nil, err
	}
	s, err := NewSigner(priv)
	return s, priv, err
}

// Public is the signer's public key.
func (s *Signer) Public() PublicKey { return s.pub }

// Ed25519 is the signer's public key when it is an Ed25519 key (the
// operator's and the engine's must be), else ErrBadKey.
func (s *Signer) Ed25519() (ed25519.PublicKey, error) {
	if k, ok := s.pub.(ed25519.PublicKey); ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: this key is %T; the operator and engine keys are Ed25519 (a KMS key for them must be an Ed25519 key, as Vault Transit holds)", ErrBadKey, s.pub)
}

// Sign signs msg (plain Ed25519, or ECDSA P-256 over its SHA-256).
func (s *Signer) Sign(msg []byte) ([]byte, error) {
	if s.kms != nil {
		return s.kms.sign(msg)
	}
	return s.sv.SignMessage(bytes.NewReader(msg))
}

// SignEnvelope signs payload as a DSSE envelope of the given payload type and
// returns the envelope's JSON.
//
// The bytes are those of sigstore's dsse.WrapSigner (TestSignEnvelopeMatchesWrapSigner),
// which signs the same PAE with the same key; built here because the
// wrapper reads its input through io.ReadAll twice and marshals through
// reflection, a tenth of a record's allocations.
func (s *Signer) SignEnvelope(payloadType string, payload []byte) ([]byte, error) {
	sig, err := s.Sign(ssldsse.PAE(payloadType, payload))
	if err != nil {
		return nil, err
	}
	pt, err := json.Marshal(payloadType)
	if err != nil {
		return nil, err
	}
	enc := base64.StdEncoding
	b := make([]byte, 0, 64+len(pt)+enc.EncodedLen(len(payload))+enc.EncodedLen(len(sig)))
	b = append(b, `{"payloadType":`...)
	b = append(b, pt...)
	b = append(b, `,"payload":"`...)
	b = enc.AppendEncode(b, payload)
	b = append(b, `","signatures":[{"keyid":"","sig":"`...)
	b = enc.AppendEncode(b, sig)
	return append(b, `"}]}`...), nil
}

// WritePrivateKeyFile writes priv as a PKCS#8 PEM file, mode 0600. It never
// overwrites an existing file: a lost key cannot be recovered, a replaced one
// silently breaks every principal that used it.
func WritePrivateKeyFile(path string, priv ed25519.PrivateKey) error {
	pemBytes, err := cryptoutils.MarshalPrivateKeyToPEM(priv)
	if err != nil {
		return err
	}
	if err := safefile.Create(filepath.Dir(path), filepath.Base(path), pemBytes, 0o600); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	return nil
}

// WritePublicKeyFile writes pub as a PEM file (mode 0644), never overwriting.
func WritePublicKeyFile(path string, pub ed25519.PublicKey) error {
	pemBytes, err := MarshalPublicKey(pub)
	if err != nil {
		return err
	}
	if err := safefile.Create(filepath.Dir(path), filepath.Base(path), pemBytes, 0o644); err != nil {
		return fmt.Errorf("write public key file: %w", err)
	}
	return nil
}

// LoadSigner reads a private key PEM file written by WritePrivateKeyFile.
// As ssh does, it refuses a file that its group or others may read or write.
func LoadSigner(path string) (*Signer, error) {
	if err := checkPrivateMode(path); err != nil {
		return nil, err
	}
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s holds a %T, want an Ed25519 private key", ErrBadKey, path, k)
	}
	return NewSigner(priv)
}

// LoadPublicKey reads an Ed25519 public key PEM file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePublicKey(b)
}

// LoadPrincipalKey reads a principal's public key PEM file: Ed25519 or
// ECDSA P-256.
func LoadPrincipalKey(path string) (PublicKey, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePrincipalKey(b)
}

// ParsePublicKey reads an Ed25519 public key from PEM.
func ParsePublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, want an Ed25519 public key", ErrBadKey, k)
	}
	return pub, nil
}

// ParsePrincipalKey reads a principal's public key from PEM: Ed25519 or
// ECDSA P-256, nothing else.
func ParsePrincipalKey(pemBytes []byte) (PublicKey, error) {
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	pub, ok := k.(PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T; a principal's key is Ed25519 or ECDSA P-256", ErrBadKey, k)
	}
	if _, err := Algorithm(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// MarshalPrincipalKey encodes a principal's public key as PEM; a key of
// another algorithm is refused.
func MarshalPrincipalKey(pub PublicKey) ([]byte, error) {
	if k, ok := pub.(ed25519.PublicKey); ok {
		return MarshalPublicKey(k)
	}
	if _, err := Algorithm(pub); err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// MarshalPublicKey encodes pub as PEM. The encoder would write a key of any
// length, which no reader accepts: a key that is not 32 bytes is refused.
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: an Ed25519 public key has %d bytes, not %d", ErrBadKey, ed25519.PublicKeySize, len(pub))
	}
	return cryptoutils.MarshalPublicKeyToPEM(crypto.PublicKey(pub))
}

// checkPrivateMode refuses a private key file that is not the owner's alone.
func checkPrivateMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("%w: %w: private key file %s has mode %04o, which lets others read it; it must be readable by its owner only (chmod 600 %s)",
			ErrBadKey, ErrKeyFileMode, path, m, path)
	}
	return nil
}

// ErrKeyFileMode: a private key file that its group or others can reach.
var ErrKeyFileMode = errors.New("private key file permissions are too open")

// readKeyFile reads a key or PIN file, which must be a regular file: it is
// opened without blocking and refused when it is a FIFO, a device or a
// socket, which could hold the command forever (a FIFO nobody writes to)
// before any KMS deadline applies.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrBadKey, path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrBadKey, path, maxKeyFile)
	}
	return b, nil
}

// Verifier checks signatures by one principal. It verifies in process,
// whatever holds the private key: a check never asks a KMS.
type Verifier struct {
	v signature.Verifier
}

// NewVerifier makes a verifier for an Ed25519 or ECDSA P-256 public key; the
// algorithm is pinned by the key's type (an ECDSA key verifies SHA-256 only).
func NewVerifier(pub PublicKey) (*Verifier, error) { return newVerifier(pub) }

func newVerifier(pub PublicKey) (*Verifier, error) {
	alg, err := Algorithm(pub)
	if err != nil {
		return nil, err
	}
	var v signature.Verifier
	if alg == AlgEd25519 {
		v, err = signature.LoadED25519Verifier(pub.(ed25519.PublicKey))
	} else {
		v, err = signature.LoadECDSAVerifier(pub.(*ecdsa.PublicKey), crypto.SHA256)
	}
	if err != nil {
		return nil, err
	}
	return &Verifier{v: v}, nil
}

// Verify checks a plain signature over msg.
func (v *Verifier) Verify(sig, msg []byte) error {
	return v.v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg))
}

// VerifyEnvelope checks a DSSE envelope and returns its payload. The payload
// type is always pinned: without it the wrapper accepts any type.
func (v *Verifier) VerifyEnvelope(env []byte, payloadType string) ([]byte, error) {
	var payload []byte
	w := dsse.WrapVerifier(v.v, dsse.WithExpectedPayloadType(payloadType), dsse.WithDecodedPayload(&payload))
	if err := w.VerifySignature(bytes.NewReader(env), nil); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return payload, nil
}
