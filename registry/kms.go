package registry

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// A key reference names a private key: a file path, or a KMS URI
// (hashivault://NAME, openbao://NAME, awskms:///ARN, gcpkms://..., azurekms://...,
// fakekms:// in tests, or a scheme served by a sigstore-kms-SCHEME plugin).
// What is not SCHEME://... is a file: "./a://b" names a file.
var kmsRefPattern = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)

// IsKMSRef reports whether ref is a KMS URI rather than a file path.
func IsKMSRef(ref string) bool { return kmsRefPattern.MatchString(ref) }

// DefaultKMSTimeout bounds each KMS call (loading the key, each signature):
// a KMS that does not answer within it is an error, never a hang.
const DefaultKMSTimeout = 10 * time.Second

var (
	// ErrKMS: a KMS refused, failed, or returned a signature that does not
	// verify. Whatever needed the signature is not done.
	ErrKMS = errors.New("KMS signing failed")
	// ErrKMSTimeout: a KMS did not answer in time. It wraps ErrKMS.
	ErrKMSTimeout = fmt.Errorf("%w: no answer in time", ErrKMS)
)

// kmsKey is a private key held by a KMS.
type kmsKey struct {
	ref     string
	sv      signature.SignerVerifier
	opts    []signature.SignOption
	verify  *Verifier
	timeout time.Duration
}

// OpenSigner opens a key reference: a file path as LoadSigner does, or a
// KMS URI through sigstore's kms.Get (the provider must be linked in; see
// docs/keys.md). A KMS key must be Ed25519 or ECDSA P-256; its public key
// is fetched once, here. Each KMS call is bounded by timeout
// (DefaultKMSTimeout when 0).
func OpenSigner(ctx context.Context, ref string, timeout time.Duration) (*Signer, error) {
	if !IsKMSRef(ref) {
		return LoadSigner(ref)
	}
	if timeout <= 0 {
		timeout = DefaultKMSTimeout
	}
	k := &kmsKey{ref: ref, timeout: timeout}
	var pub crypto.PublicKey
	err := k.bounded(ctx, "open the key", func(ctx context.Context) error {
		sv, err := kms.Get(ctx, ref, crypto.SHA256)
		if err != nil {
			return err
		}
		k.sv = sv
		pub, err = sv.PublicKey(options.WithContext(ctx))
		return err
	})
	if err != nil {
		return nil, err
	}
	p, ok := pub.(PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s holds a %T; a key is Ed25519 or ECDSA P-256", ErrBadKey, ref, pub)
	}
	if k.verify, err = newVerifier(p); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if _, ok := p.(ed25519.PublicKey); ok {
		// Ed25519 signs the message itself: without this the provider
		// would sign its SHA-256, which no Ed25519 verifier accepts.
		k.opts = []signature.SignOption{options.WithCryptoSignerOpts(crypto.Hash(0))}
	}
	return &Signer{kms: k, pub: p}, nil
}

// bounded runs f with a deadline and returns when it does or when the
// deadline passes, whichever is first: a provider that ignores its context
// still cannot hold the caller.
func (k *kmsKey) bounded(ctx context.Context, what string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %s: could not %s within %s: %v", ErrKMSTimeout, k.ref, what, k.timeout, err)
			}
			return fmt.Errorf("%w: %s: could not %s: %v", ErrKMS, k.ref, what, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: could not %s within %s", ErrKMSTimeout, k.ref, what, k.timeout)
	}
}

// sign asks the KMS for a signature and checks it against the key's
// public half before handing it out.
func (k *kmsKey) sign(msg []byte) ([]byte, error) {
	var sig []byte
	err := k.bounded(context.Background(), "sign", func(ctx context.Context) error {
		var err error
		sig, err = k.sv.SignMessage(bytes.NewReader(msg), append([]signature.SignOption{options.WithContext(ctx)}, k.opts...)...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := k.verify.Verify(sig, msg); err != nil {
		return nil, fmt.Errorf("%w: %s: its signature does not verify with its public key: %v", ErrKMS, k.ref, err)
	}
	return sig, nil
}

// CreateKMSKey makes a signing key in the KMS ref names (where the provider
// can, e.g. "ECC_NIST_P256" for AWS KMS under an alias) and returns its
// public half; a key already there is returned as it is.
func CreateKMSKey(ctx context.Context, ref, algorithm string) (crypto.PublicKey, error) {
	sv, err := kms.Get(ctx, ref, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKMS, ref, err)
	}
	pub, err := sv.CreateKey(ctx, algorithm)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: create key: %v", ErrKMS, ref, err)
	}
	return pub, nil
}
