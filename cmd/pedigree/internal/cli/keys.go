package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
	"strings"
	"time"
)

// The operator key of a data directory lives outside it, in the keys
// directory: $PEDIGREE_KEYS, else $XDG_CONFIG_HOME/pedigree/keys, else
// $HOME/.config/pedigree/keys. Beside it is its public half, the trust root
// that every verb pins by default. The library reads no environment; these
// are resolved here and passed down as paths.

// keysDir resolves the keys directory.
func (a *app) keysDir() (string, error) {
	if d := a.getenv("PEDIGREE_KEYS"); d != "" {
		return d, nil
	}
	if d := a.getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "pedigree", "keys"), nil
	}
	if d := a.getenv("HOME"); d != "" {
		return filepath.Join(d, ".config", "pedigree", "keys"), nil
	}
	return "", errors.New("no keys directory: set PEDIGREE_KEYS (or HOME), or pass --operator-key FILE")
}

// defaultOperatorKey is where init writes the data directory's operator
// key, and where freeze and checkpoint look for it.
func (a *app) defaultOperatorKey() (string, error) {
	d, err := a.keysDir()
	if err != nil {
		return "", err
	}
	return pedigree.OperatorKeyPath(d, a.dir)
}

// loadOperator loads the operator key: --operator-key REF when given, else
// $PEDIGREE_OPERATOR_KEY (a file or a KMS key reference), else the keys
// directory's. A key that is not there is said with where
// it was looked for and what finds it.
func (a *app) loadOperator(flagFile string) (*registry.Signer, error) {
	from := "--operator-key"
	if flagFile == "" {
		flagFile, from = a.getenv("PEDIGREE_OPERATOR_KEY"), "$PEDIGREE_OPERATOR_KEY"
	}
	if flagFile != "" {
		s, err := registry.OpenSigner(context.Background(), flagFile, a.kmsTimeout())
		if err == nil {
			_, err = s.Ed25519()
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", from, registry.DisplayRef(flagFile), err)
		}
		return s, nil
	}
	key, err := a.defaultOperatorKey()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(key); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: the operator key of %s is not at %s: it is looked for in the keys directory, $PEDIGREE_KEYS, else $XDG_CONFIG_HOME/pedigree/keys, else ~/.config/pedigree/keys (set PEDIGREE_KEYS as it was when 'init' ran), or pass --operator-key FILE", registry.ErrBadKey, a.dir, key)
	}
	return registry.LoadSigner(key)
}

// kmsTimeout bounds each call to a KMS: $PEDIGREE_KMS_TIMEOUT (a Go
// duration) when set and valid, else registry.DefaultKMSTimeout.
func (a *app) kmsTimeout() time.Duration {
	if d, err := time.ParseDuration(a.getenv("PEDIGREE_KMS_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return registry.DefaultKMSTimeout
}

// trustRootFile is the pinned trust root: --trust-root, else
// $PEDIGREE_TRUST_ROOT, else the operator public key in the keys directory
// when it exists; "" when none is pinned. A root that is named but cannot be
// read is an error, never "none".
func (a *app) trustRootFile() (string, error) {
	if a.trustRoot != "" {
		return a.trustRoot, nil
	}
	if f := a.getenv("PEDIGREE_TRUST_ROOT"); f != "" {
		return f, nil
	}
	key, err := a.defaultOperatorKey()
	if err != nil {
		return "", nil
	}
	if pub := pedigree.TrustRootPath(key); fileExists(pub) {
		return pub, nil
	}
	return "", nil
}

// trustRootOption pins the trust root for opening the store.
func (a *app) trustRootOption() ([]pedigree.Option, error) {
	f, err := a.trustRootFile()
	if err != nil || f == "" {
		return nil, err
	}
	r, err := pedigree.ReadTrustRoot(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return []pedigree.Option{pedigree.WithTrustRoot(r)}, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// pinnedKind is the kind of root this command pins (pedigree.TrustRootKey
// or TrustRootDigest), "" when none.
func (a *app) pinnedKind() (string, error) {
	f, err := a.trustRootFile()
	if err != nil || f == "" {
		return "", err
	}
	r, err := pedigree.ReadTrustRoot(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f, err)
	}
	if r.Digest != "" {
		return pedigree.TrustRootDigest, nil
	}
	return pedigree.TrustRootKey, nil
}

// engineKeyFile is the data directory's engine key, which signs every
// record the engine logs: in the keys directory beside the operator key
// (init writes it there). Without a keys directory it is the library's
// default, beside the data directory (pedigree.DefaultEngineKeyFile).
func (a *app) engineKeyFile() string {
	d, err := a.keysDir()
	if err != nil {
		return pedigree.DefaultEngineKeyFile(a.dir)
	}
	p, err := pedigree.EngineKeyPath(d, a.dir)
	if err != nil {
		return pedigree.DefaultEngineKeyFile(a.dir)
	}
	return p
}

// witnessFile is where the engine hands its checkpoints (a file witness
// in the keys directory, outside the data directory); "" without a keys
// directory.
func (a *app) witnessFile() string {
	d, err := a.keysDir()
	if err != nil {
		return ""
	}
	name, err := pedigree.KeyFileName(a.dir)
	if err != nil {
		return ""
	}
	return filepath.Join(d, "witness-"+strings.TrimSuffix(strings.TrimPrefix(name, "operator-"), ".key")+".json")
}

// storeKeys are the options every verb that opens the store passes: the
// engine key and the witness.
func (a *app) storeKeys() []pedigree.Option {
	opts := []pedigree.Option{pedigree.WithEngineKeyFile(a.engineKeyFile())}
	if w := a.witnessFile(); w != "" {
		opts = append(opts, pedigree.WithWitnessFile(w))
	}
	// An HTTP witness ('pedigree witness serve'), beside the file witness.
	if u := a.getenv("PEDIGREE_WITNESS_URL"); u != "" {
		k, _ := registry.LoadPublicKey(a.getenv("PEDIGREE_WITNESS_KEY")) // none: refused at open, saying so
		opts = append(opts, pedigree.WithWitnessHTTP(u, k))
	}
	return opts
}
