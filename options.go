package pedigree

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/witness"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

type config struct {
	clock     func() time.Time
	log       *slog.Logger
	policy    *gate.Policy
	policyDir string
	// replaceDir replaces the default policy, where policyDir extends it.
	replaceDir  string
	catalog     *gate.Catalog
	toolsFiles  []string
	model       *trajectory.Model
	noSync      bool
	gateTimeout time.Duration
	timeoutSet  bool
	trustRoot   *TrustRoot
	// unsealed opens without checking the configuration seal (Seal only).
	unsealed bool
	// fleetNode: opened by JoinFleet (a directory made from the stream
	// has no seal of its own).
	fleetNode bool
	// The engine key (enginekey.go): Init writes it, Open loads it.
	engineKeyFile string
	engine        *registry.Signer
	// The witnesses of the log's checkpoints (witness.go).
	witnessFiles       []string
	witnessHTTP        []*httpWitness
	checkpointEvery    int
	checkpointInterval time.Duration
	// Init only.
	operatorKeyFile string
	operator        *registry.Signer
	maxApprovalTTL  time.Duration
}

// Option configures an Engine.
type Option func(*config)

// WithClock sets the engine clock (entry times, decision times, approval
// expiry, the time policies see).
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithLogger sets the structured logger.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithPolicyDir loads an operator's Rego directory as an extension of the
// default policy (rules in package pedigree.ext; see gate.PolicyFromDir).
func WithPolicyDir(dir string) Option {
	return func(c *config) { c.policyDir = dir }
}

// WithReplacementPolicyDir loads an operator's Rego directory as the whole
// policy, in place of the default (see gate.ReplacementPolicyFromDir): the
// operator's explicit say-so, never inferred from what the directory holds.
func WithReplacementPolicyDir(dir string) Option {
	return func(c *config) { c.replaceDir = dir }
}

// WithPolicy sets an already loaded policy.
func WithPolicy(p *gate.Policy) Option { return func(c *config) { c.policy = p } }

// WithCatalog sets the tool catalog.
func WithCatalog(cat *gate.Catalog) Option { return func(c *config) { c.catalog = cat } }

// WithToolsFile loads the tool catalog from a file (instead of tools.yaml in
// the data directory).
func WithToolsFile(path string) Option { return WithToolsFiles(path) }

// WithToolsFiles loads and merges several catalog files (see
// gate.MergeCatalogs).
func WithToolsFiles(paths ...string) Option {
	return func(c *config) { c.toolsFiles = append(c.toolsFiles, paths...) }
}

// WithModel sets a trained trajectory model.
func WithModel(m *trajectory.Model) Option { return func(c *config) { c.model = m } }

// WithGateTimeout bounds one policy evaluation (default
// gate.DefaultTimeout); it must be positive.
func WithGateTimeout(d time.Duration) Option {
	return func(c *config) { c.gateTimeout, c.timeoutSet = d, true }
}

// WithoutDurabilityUnsafe turns off fsync on commit. For throwaway stores
// only: a crash can lose writes the engine acknowledged.
func WithoutDurabilityUnsafe() Option { return func(c *config) { c.noSync = true } }

// ErrOptions: options that contradict each other or are out of range.
var ErrOptions = errors.New("invalid engine options")

func newConfig(opts []Option) (config, error) {
	c := config{clock: time.Now, checkpointEvery: DefaultCheckpointEvery, checkpointInterval: DefaultCheckpointInterval}
	for _, o := range opts {
		o(&c)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, c.validate()
}

// validate refuses contradictions instead of silently ranking them.
func (c *config) validate() error {
	switch {
	case c.clock == nil:
		return fmt.Errorf("%w: WithClock(nil)", ErrOptions)
	case c.policy != nil && (c.policyDir != "" || c.replaceDir != ""):
		return fmt.Errorf("%w: WithPolicy and WithPolicyDir or WithReplacementPolicyDir both give the policy", ErrOptions)
	case c.policyDir != "" && c.replaceDir != "":
		return fmt.Errorf("%w: WithPolicyDir extends the default policy and WithReplacementPolicyDir replaces it: give one", ErrOptions)
	case c.catalog != nil && len(c.toolsFiles) > 0:
		return fmt.Errorf("%w: WithCatalog and WithToolsFile both give the tool catalog", ErrOptions)
	case c.timeoutSet && c.gateTimeout <= 0:
		return fmt.Errorf("%w: WithGateTimeout(%s): the evaluation timeout must be positive", ErrOptions, c.gateTimeout)
	case c.operatorKeyFile != "" && c.operator != nil:
		return fmt.Errorf("%w: WithOperatorKeyFile and WithOperatorSigner both give the operator key", ErrOptions)
	case c.trustRoot != nil && (len(c.trustRoot.Key) == 0) == (c.trustRoot.Digest == ""):
		return fmt.Errorf("%w: WithTrustRoot: a trust root is a key or a digest, exactly one", ErrOptions)
	}
	for _, w := range c.witnessHTTP {
		if len(w.c.Key) != ed25519.PublicKeySize || !strings.HasPrefix(w.c.URL, "http") {
			return fmt.Errorf("%w: WithWitnessHTTP(%q): an http(s) URL and the witness's Ed25519 public key", ErrOptions, w.c.URL)
		}
	}
	return nil
}

// WithOperatorKeyFile makes Init write a new operator key to path (PEM,
// mode 0600, never overwriting) and its public half, the trust root, beside
// it (TrustRootPath). Keep path outside the data directory: whoever can
// write the directory must not find the key that freezes its registry.
func WithOperatorKeyFile(path string) Option { return func(c *config) { c.operatorKeyFile = path } }

// WithOperatorSigner makes Init use an operator key the caller holds
// (nothing is written).
func WithOperatorSigner(s *registry.Signer) Option { return func(c *config) { c.operator = s } }

// WithMaxApprovalTTL sets, at Init, the cap on every approval's lifetime
// (default registry.DefaultMaxApprovalTTL); it is frozen with the registry.
func WithMaxApprovalTTL(d time.Duration) Option { return func(c *config) { c.maxApprovalTTL = d } }

// TrustRoot is what an operator pins outside the data directory: the
// operator's public key, or the hex sha256 of the freeze record
// (registry.freeze). Exactly one is set.
type TrustRoot struct {
	Key    ed25519.PublicKey
	Digest string
}

// WithTrustRoot pins the store's trust root: Open refuses a store whose
// operator key, or whose freeze record once frozen, does not match it.
func WithTrustRoot(r TrustRoot) Option { return func(c *config) { c.trustRoot = &r } }

// WithWitnessFile hands the engine's checkpoints to a file witness at path
// (outside the data directory; the CLI keeps one in the keys directory).
func WithWitnessFile(path string) Option {
	return func(c *config) { c.witnessFiles = append(c.witnessFiles, path) }
}

// WithWitnessHTTP hands the engine's checkpoints to an HTTP witness at url
// (internal/witness, `pedigree witness serve`, in the style of C2SP's
// tlog-witness) whose Ed25519 key is key: each checkpoint goes with a
// consistency proof from the size the witness holds, and its cosignature
// is checked. The store is held to what the witness holds as to a file
// witness (at open and by verify, which ask it); a witness that cannot be
// reached at open refuses writes, and one that cannot be reached after an
// approval's use denies the call.
func WithWitnessHTTP(url string, key ed25519.PublicKey) Option {
	return func(c *config) {
		c.witnessHTTP = append(c.witnessHTTP, &httpWitness{c: witness.Client{URL: url, Key: key}})
	}
}

// httpWitness is an HTTP witness and the size it was last seen to hold.
type httpWitness struct {
	c    witness.Client
	mu   sync.Mutex
	size uint64
}

// WithCheckpointEvery sets how often the engine checkpoints for its
// witnesses: every n leaves, or every d (0 keeps a default). On a fleet
// node it sets how often the node checkpoints the fleet's stream: every n
// records it publishes, or every d while it has published since (see
// fleetchain.go).
func WithCheckpointEvery(n int, d time.Duration) Option {
	return func(c *config) {
		if n > 0 {
			c.checkpointEvery = n
		}
		if d > 0 {
			c.checkpointInterval = d
		}
	}
}

// Defaults of WithCheckpointEvery: the unprotected tail is at most this
// many leaves, or this long.
const (
	DefaultCheckpointEvery    = 64
	DefaultCheckpointInterval = 5 * time.Second
)
