package pedigree

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
)

const sealPayloadType = "application/vnd.pedigree.config-seal+json"

// sealedFiles are the files of the data directory the seal covers.
var sealedFiles = []string{ToolsFile, ModelFile, MCPConfigFile, HookMappingFile}

// sealStatement is the signed payload: the freeze it belongs to, and each
// sealed file's sha256 (hex), absent files left out.
type sealStatement struct {
	Version int               `json:"version"`
	Freeze  string            `json:"freeze"`
	Files   map[string]string `json:"files"`
}

// ErrConfigSeal: the data directory's configuration is not what the
// operator sealed (a ConfigSealError).
var ErrConfigSeal = errors.New("the data directory's configuration differs from the operator's seal")

// ConfigSealError says what differs from the seal.
type ConfigSealError struct {
	Differences []string
}

func (e *ConfigSealError) Error() string {
	return ErrConfigSeal.Error() + " (" + SealFile + "): " + strings.Join(e.Differences, "; ")
}

// Is makes errors.Is(err, ErrConfigSeal) and errors.Is(err, ErrTampered)
// true: configuration changed behind the operator's back is tampering.
func (e *ConfigSealError) Is(target error) bool {
	return target == ErrConfigSeal || target == ErrTampered
}

// SealedFiles names the files of dir that the seal covers now (those that
// exist), in order.
func SealedFiles(dir string) ([]string, error) {
	files, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, name := range sealedFiles {
		if _, ok := files[name]; ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// withoutSeal opens a store without checking the seal: only Seal does,
// to seal what the operator changed.
func withoutSeal() Option { return func(c *config) { c.unsealed = true } }

// seal writes SealFile over the files dir holds now.
func (e *Engine) seal(operator *registry.Signer) error {
	if !e.reg.OperatorKey().Equal(operator.Public()) {
		return fmt.Errorf("%w: this is not the operator key that froze the registry", registry.ErrBadKey)
	}
	files, err := readConfig(e.dir)
	if err != nil {
		return err
	}
	st, err := sealOf(e.reg, files)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(st)
	if err != nil {
		return err
	}
	env, err := operator.SignEnvelope(sealPayloadType, payload)
	if err != nil {
		return err
	}
	if err := safefile.WriteFile(e.dir, SealFile, env, 0o444); err != nil {
		return fmt.Errorf("the configuration seal could not be written: %w", err)
	}
	return nil
}

// readConfig reads each sealed file dir holds, once: what it returns is
// what the engine then parses, so a file swapped after the check is never
// the one used.
func readConfig(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	if dir == "" {
		return files, nil
	}
	for _, name := range sealedFiles {
		b, err := readFileLimited(dir, name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, err
		}
		files[name] = b
	}
	return files, nil
}

// sealOf is the statement that seals files under reg's freeze.
func sealOf(reg *registry.Registry, files map[string][]byte) (*sealStatement, error) {
	freeze, err := reg.FreezeDigest()
	if err != nil {
		return nil, err
	}
	st := &sealStatement{Version: 1, Freeze: freeze, Files: map[string]string{}}
	for name, b := range files {
		st.Files[name] = fileDigest(b)
	}
	return st, nil
}

// checkSeal refuses a frozen store whose sealed files (as readConfig read
// them) are not the ones the operator sealed, or that has no seal. Before freeze there is
// nothing to check: the bootstrap verbs (mcp add, hook claude init) write
// the catalog, and freeze seals it.
func checkSeal(dir string, reg *registry.Registry, files map[string][]byte, fleetNode bool) error {
	if dir == "" || !reg.Frozen() {
		return nil
	}
	now, err := sealOf(reg, files)
	if err != nil {
		return err
	}
	env, err := readFileLimited(dir, SealFile)
	if errors.Is(err, os.ErrNotExist) {
		// Freeze writes the seal, so a frozen directory without one lost it:
		// deleting the seal with the model would drop the model's alerts.
		// A fleet node's directory, made from the stream, has none (its
		// operator key is elsewhere): there only unsealed files are refused.
		if fleetNode && len(now.Files) == 0 {
			return nil
		}
		diffs := []string{SealFile + " is missing"}
		for _, name := range sealedFiles {
			if now.Files[name] != "" {
				diffs = append(diffs, name+" is not sealed")
			}
		}
		return &ConfigSealError{Differences: diffs}
	} else if err != nil {
		return err
	}
	sealed, err := openSeal(env, reg.OperatorKey())
	if err != nil {
		return err
	}
	var diffs []string
	if sealed.Freeze != now.Freeze {
		diffs = append(diffs, SealFile+" seals another registry's freeze")
	}
	for _, name := range sealedFiles {
		if d := fileDiff(name, sealed.Files[name], now.Files[name]); d != "" {
			diffs = append(diffs, d)
		}
	}
	for name := range sealed.Files {
		if !slices.Contains(sealedFiles, name) {
			diffs = append(diffs, SealFile+" names an unknown file "+name)
		}
	}
	if len(diffs) > 0 {
		return &ConfigSealError{Differences: diffs}
	}
	return nil
}

// openSeal verifies a seal's signature with the operator key and reads it.
func openSeal(env []byte, operator ed25519.PublicKey) (*sealStatement, error) {
	v, err := registry.NewVerifier(operator)
	if err != nil {
		return nil, err
	}
	payload, err := v.VerifyEnvelope(env, sealPayloadType)
	if err != nil {
		return nil, &ConfigSealError{Differences: []string{SealFile + " is not signed by the operator key: " + err.Error()}}
	}
	var sealed sealStatement
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sealed); err != nil || sealed.Version != 1 {
		return nil, &ConfigSealError{Differences: []string{SealFile + " is not a seal this version reads"}}
	}
	return &sealed, nil
}

// ReadSealed reads one sealed file of dir (MCPConfigFile,
// HookMappingFile, ...) as the operator sealed it, for a reader that does
// not open the store itself (the gateway and the hook, which may go
// through a running server): view is the registry as the caller's backend
// reports it, already held to the trust root. Before freeze the file is read
// as it is. After, the seal must verify with view's operator key, belong to
// view's freeze, and name the file's digest, or its absence (then the error
// wraps os.ErrNotExist); anything else is a ConfigSealError.
func ReadSealed(dir string, view *RegistryView, name string) ([]byte, error) {
	if !slices.Contains(sealedFiles, name) {
		return nil, fmt.Errorf("%w: %s is not a sealed file", ErrOptions, name)
	}
	b, err := readFileLimited(dir, name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if !view.Frozen {
		return b, err
	}
	env, serr := readFileLimited(dir, SealFile)
	if errors.Is(serr, os.ErrNotExist) {
		return nil, &ConfigSealError{Differences: []string{SealFile + " is missing"}}
	} else if serr != nil {
		return nil, serr
	}
	sealed, serr := openSeal(env, view.OperatorKey)
	if serr != nil {
		return nil, serr
	}
	if sealed.Freeze != view.FreezeDigest {
		return nil, &ConfigSealError{Differences: []string{SealFile + " seals another registry's freeze"}}
	}
	is := ""
	if err == nil {
		is = fileDigest(b)
	}
	if d := fileDiff(name, sealed.Files[name], is); d != "" {
		return nil, &ConfigSealError{Differences: []string{d}}
	}
	return b, err // err: absent, as sealed
}

// fileDigest is a sealed file's digest: its sha256, hex.
func fileDigest(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// fileDiff says how a sealed file differs from the seal ("" if it does
// not): was and is are its digests in the seal and now, "" for absent.
func fileDiff(name, was, is string) string {
	switch {
	case was == is:
		return ""
	case was == "":
		return name + " was added since the seal"
	case is == "":
		return name + " was removed since the seal"
	}
	return name + " was changed since the seal"
}

// MaxConfigBytes bounds each configuration file and the seal.
const MaxConfigBytes = 16 << 20

// readFileLimited reads a configuration file of dir that must be a
// regular file of this user's with one link, reached without following a
// link, of at most MaxConfigBytes: a FIFO or a device put in its place
// would hang or exhaust every verb, a link would read another file.
func readFileLimited(dir, name string) ([]byte, error) {
	return safefile.ReadFile(dir, name, MaxConfigBytes)
}
