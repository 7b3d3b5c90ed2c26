package pedigree

import (
	"log/slog"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/trajectory"
)

type config struct {
	clock      func() time.Time
	log        *slog.Logger
	policy     *gate.Policy
	policyDir  string
	catalog    *gate.Catalog
	toolsFile  string
	model      *trajectory.Model
	inMemory   bool
	noSync     bool
	gateTimout time.Duration
}

// Option configures an Engine.
type Option func(*config)

// WithClock sets the engine clock (entry times, decision times, approval
// expiry, the time policies see).
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithLogger sets the structured logger.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithPolicyDir loads an operator's Rego directory (replacing or extending
// the default policy, see gate.PolicyFromDir).
func WithPolicyDir(dir string) Option { return func(c *config) { c.policyDir = dir } }

// WithPolicy sets an already loaded policy.
func WithPolicy(p *gate.Policy) Option { return func(c *config) { c.policy = p } }

// WithCatalog sets the tool catalog.
func WithCatalog(cat *gate.Catalog) Option { return func(c *config) { c.catalog = cat } }

// WithToolsFile loads the tool catalog from a file (instead of tools.yaml in
// the data directory).
func WithToolsFile(path string) Option { return func(c *config) { c.toolsFile = path } }

// WithModel sets a trained trajectory model.
func WithModel(m *trajectory.Model) Option { return func(c *config) { c.model = m } }

// WithGateTimeout bounds one policy evaluation.
func WithGateTimeout(d time.Duration) Option { return func(c *config) { c.gateTimout = d } }

// InMemory keeps the store in memory: the same code paths, no directory.
func InMemory() Option { return func(c *config) { c.inMemory = true } }

// WithoutDurabilityUnsafe turns off fsync on commit. For throwaway stores
// only: a crash can lose writes the engine acknowledged.
func WithoutDurabilityUnsafe() Option { return func(c *config) { c.noSync = true } }

func newConfig(opts []Option) config {
	c := config{clock: time.Now}
	for _, o := range opts {
		o(&c)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}
