package pedigree

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"bytes"
	"encoding/base64"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// The engine signs what it logs. Every leaf of the Merkle log (an entry, a
// decision, a recall: what a decision says and which approval it spent is
// in the record its leaf hashes) gets an attestation: a DSSE envelope,
// signed by the engine key, over the leaf's index, kind and ID. The engine
// key lives outside the data directory like the operator key (the keys
// directory; WithEngineKeyFile), and its public half is a principal of the
// registry, EnginePrincipal, frozen (certified) by the operator with the
// others. So a writer of the directory without the key can delete leaves
// from the end of the log, but cannot drop, add, reorder or rewrite one
// before the last without verify naming it: every later leaf's
// attestation names its index.

// EnginePrincipal is the engine key's principal in the registry. Its tier
// is external: an entry signed with it is never trusted, so holding the
// engine key gives no authority over what is allowed.
const EnginePrincipal = "engine:local"

// enginePayloadType is the DSSE payload type of a leaf attestation.
const enginePayloadType = "application/vnd.pedigree.leaf+json"

// ErrNoEngineKey: the engine cannot sign what it logs, so it writes
// nothing (reads and verify still work).
var ErrNoEngineKey = errors.New("the engine key is not available: nothing can be logged")

// WithEngineKeyFile names the engine key file: Init writes a new key there
// (mode 0600, never overwriting) and registers its public half; Open
// loads it. Keep it outside the data directory. Without this option (and
// without WithEngineSigner) the key is DefaultEngineKeyFile(dir).
func WithEngineKeyFile(path string) Option { return func(c *config) { c.engineKeyFile = path } }

// WithEngineSigner gives the engine its key directly (nothing is written).
func WithEngineSigner(s *registry.Signer) Option { return func(c *config) { c.engine = s } }

// DefaultEngineKeyFile is where a library caller's engine key lives when
// no option names it: beside the data directory, outside it. The CLI keeps
// it in the keys directory instead (EngineKeyPath).
func DefaultEngineKeyFile(dir string) string {
	return filepath.Clean(dir) + ".engine.key"
}

// EngineKeyPath is where the engine key of dataDir lives in keysDir,
// beside its operator key.
func EngineKeyPath(keysDir, dataDir string) (string, error) {
	name, err := KeyFileName(dataDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(keysDir, "engine-"+strings.TrimPrefix(name, "operator-")), nil
}

// engineKeyFile is the engine key file c names for dir ("" in memory).
func (c *config) engineKeyFileFor(dir string) string {
	if c.engineKeyFile != "" {
		return c.engineKeyFile
	}
	if dir == "" {
		return ""
	}
	return DefaultEngineKeyFile(dir)
}

// loadEngineKey is the engine's signer for an opened store: the one given,
// else the key file's; when it is missing, or is not the key the registry
// certifies, the engine opens without one and says why at the first write.
func (e *Engine) loadEngineKey() {
	s := e.cfg.engine
	if s == nil {
		path := e.cfg.engineKeyFileFor(e.dir)
		if path == "" {
			e.engineErr = fmt.Errorf("%w: no engine key was given", ErrNoEngineKey)
			return
		}
		var err error
		if s, err = registry.LoadSigner(path); err != nil {
			e.engineErr = fmt.Errorf("%w: %v", ErrNoEngineKey, err)
			return
		}
	}
	id, ok := e.certifiedEngineKey(s.Public())
	if !ok {
		if len(e.engineKeys()) == 0 && e.reg.Frozen() {
			e.engineErr = fmt.Errorf("%w: this store was frozen before pedigree signed its log (its registry certifies no engine key); "+
				"it can be read and verified, but not written: make a new data directory with 'pedigree init'", ErrNoEngineKey)
			return
		}
		e.engineErr = fmt.Errorf("%w: the engine key (sha256 %s) is not the one this store's registry certifies", ErrNoEngineKey, registry.KeyFingerprint(s.Public())[:12])
		return
	}
	e.engine, e.engineID = s, id
}

// engineVerifiers verify the engine keys' signatures (made once: the
// registry is frozen).
func (e *Engine) engineVerifiers() []*registry.Verifier {
	e.verifiersOnce.Do(func() {
		e.engineKeyByID = map[string]ed25519.PublicKey{}
		for _, p := range e.engineKeys() {
			// An engine key is Ed25519 (the log's checkpoints and the
			// fleet's record signatures are).
			k, ok := p.PublicKey.(ed25519.PublicKey)
			if !ok {
				continue
			}
			if v, err := registry.NewVerifier(k); err == nil {
				e.verifiers = append(e.verifiers, v)
				e.engineKeyByID[p.ID] = k
			}
		}
	})
	return e.verifiers
}

// engineKeyList are the public halves of engineKeys.
func (e *Engine) engineKeyList() []ed25519.PublicKey {
	var out []ed25519.PublicKey
	for _, p := range e.engineKeys() {
		// An engine key is Ed25519 (the log's checkpoints are).
		if k, ok := p.PublicKey.(ed25519.PublicKey); ok {
			out = append(out, k)
		}
	}
	return out
}

// engineKeys are the engine keys the registry holds.
func (e *Engine) engineKeys() []registry.Principal {
	var out []registry.Principal
	for _, p := range e.reg.List() {
		// Only at the external tier: an engine key carries no authority.
		if strings.HasPrefix(p.ID, "engine:") && p.Tier == registry.External {
			out = append(out, p)
		}
	}
	return out
}

// certifiedEngineKey is the engine principal whose key pub is, if any.
func (e *Engine) certifiedEngineKey(pub registry.PublicKey) (string, bool) {
	for _, p := range e.engineKeys() {
		if p.PublicKey.Equal(pub) {
			return p.ID, true
		}
	}
	return "", false
}

// attestation is what the engine signs for a leaf.
type attestation struct {
	Index uint64 `json:"index"`
	Kind  string `json:"kind"`
	ID    string `json:"id"`
}

// appendLeaf logs id inside t (the whole key space) and stores the
// engine's attestation of the leaf with it. A fleet node's log is made
// from the stream and is not attested (see SECURITY.md).
func (e *Engine) appendLeaf(t *store.Txn, kind byte, id string) (uint64, error) {
	lt := t.In(store.Log)
	idx, err := tlog.Append(lt, kind, id)
	if err != nil || e.cfg.fleetNode {
		return idx, err
	}
	if err := e.witnessRefusal(); err != nil {
		return 0, err
	}
	if e.engine == nil {
		if e.engineErr != nil {
			return 0, e.engineErr
		}
		return 0, ErrNoEngineKey
	}
	payload, err := json.Marshal(attestation{Index: idx, Kind: tlog.KindName(kind), ID: id})
	if err != nil {
		return 0, err
	}
	env, err := e.engine.SignEnvelope(enginePayloadType, payload)
	if err == nil {
		env, err = canonicalEnvelope(env)
	}
	if err != nil {
		return 0, err
	}
	return idx, tlog.SetAttestation(lt, idx, env)
}

// checkAttestation checks, inside lt, that the leaf at index is attested
// by an engine key the registry certifies, for that index, kind and ID.
func (e *Engine) checkAttestation(lt *store.Txn, index uint64, kind byte, id string) error {
	env, err := tlog.Attestation(lt, index)
	if err != nil {
		return fmt.Errorf("the leaf is not signed by the engine: %w", err)
	}
	// Only the bytes the engine wrote: an envelope re-spelt (a key's case,
	// base64's spare bits) is not one it made, even when it still verifies.
	if c, err := canonicalEnvelope(env); err != nil || !bytes.Equal(c, env) {
		return errors.New("the leaf's engine attestation is not as the engine wrote it")
	}
	var payload []byte
	for _, v := range e.engineVerifiers() {
		if payload, err = v.VerifyEnvelope(env, enginePayloadType); err == nil {
			break
		}
	}
	if payload == nil {
		return errors.New("the leaf's engine signature does not verify with a key the registry certifies")
	}
	var a attestation
	if err := json.Unmarshal(payload, &a); err != nil {
		return fmt.Errorf("the leaf's engine attestation does not decode: %v", err)
	}
	if a.Index != index || a.Kind != tlog.KindName(kind) || a.ID != id {
		return fmt.Errorf("the engine signed %s %s at leaf %d, not this: a leaf was added, dropped, moved or rewritten", a.Kind, a.ID, a.Index)
	}
	return nil
}

// envelope is a DSSE envelope as the engine stores it.
type envelope struct {
	PayloadType string `json:"payloadType"`
	Payload     string `json:"payload"`
	Signatures  []struct {
		KeyID string `json:"keyid"`
		Sig   string `json:"sig"`
	} `json:"signatures"`
}

// canonicalEnvelope is env spelt one way: its fields in one order, base64
// re-encoded from the decoded bytes.
func canonicalEnvelope(env []byte) ([]byte, error) {
	var v envelope
	if err := json.Unmarshal(env, &v); err != nil {
		return nil, err
	}
	reenc := func(s string) (string, error) {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		return base64.StdEncoding.EncodeToString(b), err
	}
	var err error
	if v.Payload, err = reenc(v.Payload); err != nil {
		return nil, err
	}
	for i := range v.Signatures {
		if v.Signatures[i].Sig, err = reenc(v.Signatures[i].Sig); err != nil {
			return nil, err
		}
	}
	return json.Marshal(v)
}
