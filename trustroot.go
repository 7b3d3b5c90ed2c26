package pedigree

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pedigree-ai/pedigree/registry"
)

// Nothing inside a data directory can anchor trust by itself: whoever can
// write it can replace the operator's public key row, register a principal
// and freeze again with a key of their own. A trust root is kept outside the
// directory, either the operator's public key or the digest of the freeze
// record, and Open refuses a store that does not match it.

// ErrTrustRoot: the store does not match the pinned trust root. Open
// returns a *TrustRootError, which matches it with errors.Is.
var ErrTrustRoot = errors.New("the store does not match the pinned trust root")

// TrustRootError says how the store differs from the pinned root.
type TrustRootError struct {
	Reason string
}

func (e *TrustRootError) Error() string { return ErrTrustRoot.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrTrustRoot) true, and errors.Is(err,
// ErrTampered): a store that does not match its pinned root is evidence of
// tampering, not a failure to check.
func (e *TrustRootError) Is(target error) bool {
	return target == ErrTrustRoot || target == ErrTampered
}

// How a store's trust is anchored, as verify and the server report it.
const (
	TrustRootKey    = "pinned key"
	TrustRootDigest = "pinned digest"
	TrustRootNone   = "none"
)

// ParseTrustRoot reads a trust root: an Ed25519 public key in PEM, or a
// freeze digest of 64 hex characters (surrounding white space is ignored).
func ParseTrustRoot(b []byte) (TrustRoot, error) {
	b = bytes.TrimSpace(b)
	if bytes.HasPrefix(b, []byte("-----BEGIN")) {
		k, err := registry.ParsePublicKey(b)
		if err != nil {
			return TrustRoot{}, fmt.Errorf("trust root: %w", err)
		}
		return TrustRoot{Key: k}, nil
	}
	s := strings.ToLower(string(b))
	if raw, err := hex.DecodeString(s); err != nil || len(raw) != sha256.Size {
		return TrustRoot{}, fmt.Errorf("%w: a trust root is the operator's public key (PEM) or a freeze digest (64 hex characters)", registry.ErrBadKey)
	}
	return TrustRoot{Digest: s}, nil
}

// ReadTrustRoot reads a trust root file (see ParseTrustRoot).
func ReadTrustRoot(path string) (TrustRoot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return TrustRoot{}, fmt.Errorf("trust root: %w", err)
	}
	return ParseTrustRoot(b)
}

func (r *TrustRoot) kind() string {
	switch {
	case r == nil:
		return TrustRootNone
	case r.Digest != "":
		return TrustRootDigest
	}
	return TrustRootKey
}

// check refuses a registry that the root does not anchor.
func (r *TrustRoot) check(reg *registry.Registry) error {
	if r == nil {
		return nil
	}
	if len(r.Key) > 0 {
		if !reg.OperatorKey().Equal(r.Key) {
			return &TrustRootError{Reason: "the store's operator key is not the pinned key (the registry may have been rebuilt)"}
		}
		return nil
	}
	d, err := reg.FreezeDigest()
	switch {
	case err != nil:
		return err
	case d == "":
		return &TrustRootError{Reason: "a freeze digest is pinned, but the store has no freeze record"}
	case d != r.Digest:
		return &TrustRootError{Reason: "the store's freeze record is not the pinned one (digest " + d[:16] + "…)"}
	}
	return nil
}

// Matches checks a registry as a backend reports it (a running server's)
// against the root, as Open checks a store.
func (r TrustRoot) Matches(v *RegistryView) error {
	switch {
	case len(r.Key) > 0 && !r.Key.Equal(v.OperatorKey):
		return &TrustRootError{Reason: "the server's operator key is not the pinned key"}
	case r.Digest != "" && v.FreezeDigest != r.Digest:
		return &TrustRootError{Reason: "the server's freeze record is not the pinned one"}
	}
	return nil
}

// TrustRoot says how this engine's store is anchored: TrustRootKey,
// TrustRootDigest or TrustRootNone.
func (e *Engine) TrustRoot() string { return e.cfg.trustRoot.kind() }

// KeyFileName is the base name under which the operator key of a data
// directory is kept in a keys directory: operator-<h>.key, h the first 16 hex
// characters of the sha256 of the directory's absolute path.
func KeyFileName(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256([]byte(abs))
	return "operator-" + hex.EncodeToString(s[:])[:16] + ".key", nil
}

// OperatorKeyPath is where the operator key of dataDir lives in keysDir.
func OperatorKeyPath(keysDir, dataDir string) (string, error) {
	name, err := KeyFileName(dataDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(keysDir, name), nil
}

// TrustRootPath is the public key written beside an operator key file:
// the same name with .pub for .key (or .pub appended).
func TrustRootPath(keyFile string) string {
	return strings.TrimSuffix(keyFile, ".key") + ".pub"
}
