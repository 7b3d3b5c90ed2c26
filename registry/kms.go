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

// A key reference names a private key: a file path, a KMS URI
// (hashivault://NAME, openbao://NAME, awskms:///ARN, gcpkms://..., azurekms://...,
// fakekms:// in tests, or a scheme served by a sigstore-kms-SCHEME plugin),
// or a PKCS#11 URI (pkcs11:..., RFC 7512; see pkcs11uri.go).
// What is neither SCHEME://... nor pkcs11:... is a file: "./a://b" names a file.
var kmsRefPattern = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)

// IsKMSRef reports whether ref names a key held by a KMS or a PKCS#11
// token rather than a file path.
func IsKMSRef(ref string) bool { return kmsRefPattern.MatchString(ref) || isPKCS11Ref(ref) }

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

// kmsKey is a private key held by a KMS or a PKCS#11 token.
type kmsKey struct {
	ref     string // as errors show it (DisplayRef)
	signer  func(ctx context.Context, msg []byte) ([]byte, error)
	verify  *Verifier
	timeout time.Duration
}

// OpenSigner opens a key reference: a file path as LoadSigner does, a KMS
// URI through sigstore's kms.Get (the provider must be linked in; see
// docs/keys.md), or a pkcs11: URI through crypto11 (in a cgo build). A KMS
// or PKCS#11 key must be Ed25519 or ECDSA P-256; its public key is fetched
// once, here. Each call to the KMS or token is bounded by timeout
// (DefaultKMSTimeout when 0).
func OpenSigner(ctx context.Context, ref string, timeout time.Duration) (*Signer, error) {
	if !IsKMSRef(ref) {
		return LoadSigner(ref)
	}
	if timeout <= 0 {
		timeout = DefaultKMSTimeout
	}
	k := &kmsKey{ref: DisplayRef(ref), timeout: timeout}
	var (
		pub   crypto.PublicKey
		open  func(context.Context) error
		plain bool // the signer signs the message itself, Ed25519 over a KMS
	)
	if isPKCS11Ref(ref) {
		if !PKCS11Available {
			return nil, fmt.Errorf("%w: %s: %v", ErrKMS, k.ref, errNoPKCS11)
		}
		r, pin, err := pkcs11Open(ref)
		if err != nil {
			return nil, err
		}
		open = func(context.Context) error {
			var err error
			pub, k.signer, err = openPKCS11(r, pin)
			return err
		}
	} else {
		open = func(ctx context.Context) error {
			sv, err := kms.Get(ctx, ref, crypto.SHA256)
			if err != nil {
				return err
			}
			k.signer = func(ctx context.Context, msg []byte) ([]byte, error) {
				opts := []signature.SignOption{options.WithContext(ctx)}
				if plain {
					// Ed25519 signs the message itself: without this the
					// provider would sign its SHA-256, which no Ed25519
					// verifier accepts.
					opts = append(opts, options.WithCryptoSignerOpts(crypto.Hash(0)))
				}
				return sv.SignMessage(bytes.NewReader(msg), opts...)
			}
			pub, err = sv.PublicKey(options.WithContext(ctx))
			return err
		}
	}
	if err := k.bounded(ctx, "open the key", open); err != nil {
		return nil, err
	}
	p, ok := pub.(PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s holds a %T; a key is Ed25519 or ECDSA P-256", ErrBadKey, k.ref, pub)
	}
	var err error
	if k.verify, err = newVerifier(p); err != nil {
		return nil, fmt.Errorf("%s: %w", k.ref, err)
	}
	_, plain = p.(ed25519.PublicKey)
	return &Signer{kms: k, pub: p}, nil
}

// pkcs11Open parses a pkcs11: reference and reads the PIN it names.
func pkcs11Open(ref string) (*pkcs11Ref, string, error) {
	r, err := parsePKCS11Ref(ref)
	if err != nil {
		return nil, "", err
	}
	pin, err := r.pin(DisplayRef(ref))
	if err != nil {
		return nil, "", err
	}
	return r, pin, nil
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
		sig, err = k.signer(ctx, msg)
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
//
// For a pkcs11: reference the algorithm is AlgECDSAP256, and the key pair
// is made in the token, labelled object= and with CKA_ID id=.
func CreateKMSKey(ctx context.Context, ref, algorithm string) (crypto.PublicKey, error) {
	if isPKCS11Ref(ref) {
		if !PKCS11Available {
			return nil, fmt.Errorf("%w: %s: %v", ErrKMS, DisplayRef(ref), errNoPKCS11)
		}
		r, pin, err := pkcs11Open(ref)
		if err != nil {
			return nil, err
		}
		pub, err := createPKCS11Key(r, pin, algorithm)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: create key: %v", ErrKMS, DisplayRef(ref), err)
		}
		return pub, nil
	}
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
