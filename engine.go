package pedigree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Files in the data directory besides the store.
const (
	OperatorKeyFile = "operator.key"
	FreezeFile      = "registry.freeze"
	ToolsFile       = "tools.yaml"
	ModelFile       = "trajectory-model.json"
)

// DefaultTau is the strong-edge threshold unless init is told otherwise.
const DefaultTau = 0.5

// Engine is an open data directory.
type Engine struct {
	db    *store.DB
	reg   *registry.Registry
	graph *lineage.Graph
	gate  *gate.Gate
	cfg   config
	dir   string
}

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

// Init creates a data directory: the store, τ, and the operator key (written
// to dir/operator.key, mode 0600), which signs the registry freeze. It
// refuses a directory that already holds a store.
func Init(ctx context.Context, dir string, tau float64, opts ...Option) (*Engine, error) {
	if err := registry.ValidateTau(tau); err != nil {
		return nil, err
	}
	c := newConfig(opts)
	if c.inMemory {
		return nil, errors.New("pedigree: Init makes a data directory; use NewInMemory for an in-memory engine")
	}
	if fileExists(filepath.Join(dir, OperatorKeyFile)) {
		return nil, fmt.Errorf("%s: %w", dir, store.ErrExists)
	}
	db, err := store.Create(dir, store.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	// Anything that fails from here leaves no half-made store behind.
	undo := func(err error) (*Engine, error) {
		db.Close()
		os.RemoveAll(filepath.Join(dir, "db"))
		os.Remove(filepath.Join(dir, OperatorKeyFile))
		return nil, err
	}
	op, priv, err := registry.GenerateSigner(nil)
	if err != nil {
		return undo(err)
	}
	if err := registry.Bootstrap(db, tau, op.Public(), c.clock()); err != nil {
		return undo(err)
	}
	if err := registry.WritePrivateKeyFile(filepath.Join(dir, OperatorKeyFile), priv); err != nil {
		return undo(err)
	}
	return open(ctx, db, dir, c)
}

// NewInMemory makes a fresh in-memory engine whose operator is the given
// signer (replays and tests): register principals, Freeze, then use it.
func NewInMemory(ctx context.Context, tau float64, operator *registry.Signer, opts ...Option) (*Engine, error) {
	opts = append(opts, InMemory())
	c := newConfig(opts)
	db, err := store.Create("", store.Options{InMemory: true})
	if err != nil {
		return nil, err
	}
	if err := registry.Bootstrap(db, tau, operator.Public(), c.clock()); err != nil {
		db.Close()
		return nil, err
	}
	return open(ctx, db, "", c)
}

// Open opens an existing data directory. It refuses a store whose registry
// was changed behind the engine's back since freeze (*registry.TamperError).
func Open(ctx context.Context, dir string, opts ...Option) (*Engine, error) {
	c := newConfig(opts)
	db, err := store.Open(dir, store.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	return open(ctx, db, dir, c)
}

func open(ctx context.Context, db *store.DB, dir string, c config) (*Engine, error) {
	fail := func(err error) (*Engine, error) { db.Close(); return nil, err }
	reg, err := registry.Load(db)
	if err != nil {
		return fail(err)
	}
	graph := lineage.New(db, reg, c.log)
	if err := checkFreezeAnchors(dir, reg, graph); err != nil {
		graph.Close()
		return fail(err)
	}
	if c.catalog == nil {
		path := c.toolsFile
		if path == "" && dir != "" {
			if p := filepath.Join(dir, ToolsFile); fileExists(p) {
				path = p
			}
		}
		if path != "" {
			if c.catalog, err = gate.LoadCatalog(path); err != nil {
				return fail(err)
			}
		}
	}
	if c.policy == nil && c.policyDir != "" {
		if c.policy, err = gate.PolicyFromDir(c.policyDir); err != nil {
			return fail(err)
		}
	}
	if c.model == nil && dir != "" {
		if p := filepath.Join(dir, ModelFile); fileExists(p) {
			if c.model, err = trajectory.LoadModel(p); err != nil {
				return fail(err)
			}
		}
	}
	gopts := []gate.Option{gate.WithCatalog(c.catalog), gate.WithClock(c.clock), gate.WithLogger(c.log), gate.WithModel(c.model)}
	if c.policy != nil {
		gopts = append(gopts, gate.WithPolicy(c.policy))
	}
	if c.gateTimout > 0 {
		gopts = append(gopts, gate.WithTimeout(c.gateTimout))
	}
	g, err := gate.New(ctx, graph, db, gopts...)
	if err != nil {
		graph.Close()
		return fail(err)
	}
	return &Engine{db: db, reg: reg, graph: graph, gate: g, cfg: c, dir: dir}, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Close finishes the writes in flight and closes the store.
func (e *Engine) Close() error {
	e.graph.Close()
	return e.db.Close()
}

// Dir is the data directory ("" in memory).
func (e *Engine) Dir() string { return e.dir }

// Registry is the principal registry.
func (e *Engine) Registry() *registry.Registry { return e.reg }

// Graph is the lineage graph.
func (e *Engine) Graph() *lineage.Graph { return e.graph }

// Gate is the gate.
func (e *Engine) Gate() *gate.Gate { return e.gate }

// AddPrincipal registers a principal; ErrFrozen after freeze.
func (e *Engine) AddPrincipal(ctx context.Context, p registry.Principal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.reg.Add(p)
}

// Freeze freezes the registry with the operator key, and keeps a copy of
// the signed freeze record beside the store (registry.freeze).
func (e *Engine) Freeze(ctx context.Context, operator *registry.Signer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.reg.Freeze(operator, e.cfg.clock()); err != nil {
		return err
	}
	if e.dir == "" {
		return nil
	}
	rec, err := e.reg.FreezeRecord()
	if err != nil {
		return err
	}
	path := filepath.Join(e.dir, FreezeFile)
	if err := os.WriteFile(path+".tmp", rec, 0o444); err != nil {
		return fmt.Errorf("the registry is frozen, but its copy could not be written: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

// checkFreezeAnchors refuses a store whose freeze record was deleted or
// swapped: entries exist only after freeze, and the copy beside the store
// must match the record in it.
func checkFreezeAnchors(dir string, reg *registry.Registry, graph *lineage.Graph) error {
	rec, err := reg.FreezeRecord()
	if err != nil {
		return err
	}
	if rec == nil {
		n, err := graph.Count(1)
		if err != nil {
			return err
		}
		if n > 0 {
			return &registry.TamperError{Differences: []string{"the store holds entries but no freeze record: it was deleted"}}
		}
	}
	if dir == "" {
		return nil
	}
	copyRec, err := os.ReadFile(filepath.Join(dir, FreezeFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case rec == nil:
		return &registry.TamperError{Differences: []string{FreezeFile + " exists but the store has no freeze record: it was deleted"}}
	case !bytes.Equal(copyRec, rec):
		return &registry.TamperError{Differences: []string{"the store's freeze record differs from " + FreezeFile}}
	}
	return nil
}

// Entry is what a harness records: who says what, in which session, derived
// from what.
type Entry struct {
	Principal string
	Kind      lineage.Kind
	Session   string
	Content   []byte
	// Parents, when not nil, are the harness's attribution. When nil, an
	// agent's entry in a session derives from the session's whole context
	// with strong edges (the agent read all of it); other principals'
	// entries have no parents.
	Parents []lineage.Parent
	// StoreContent keeps the content itself beside its digest.
	StoreContent bool
}

// Reader is what building a statement reads: the session's context (for
// default parents and justifications) and ID resolution. The engine reads
// its store; a client of the sidecar server reads the server.
type Reader interface {
	Context(ctx context.Context, session string) ([]string, error)
	Resolve(ctx context.Context, prefix string) (string, error)
}

type engineReader struct{ e *Engine }

func (r engineReader) Context(ctx context.Context, session string) ([]string, error) {
	return r.e.graph.Context(ctx, session)
}
func (r engineReader) Resolve(_ context.Context, prefix string) (string, error) {
	return r.e.graph.Resolve(prefix)
}

// Statement builds the statement for an entry, filling in the default
// parents from the session's context.
func (e *Engine) Statement(ctx context.Context, en Entry) (*lineage.Statement, error) {
	return BuildEntry(ctx, engineReader{e}, en, e.cfg.clock())
}

// BuildEntry builds the statement for an entry at time now, reading the
// session's context through r when the entry takes its default parents.
func BuildEntry(ctx context.Context, r Reader, en Entry, now time.Time) (*lineage.Statement, error) {
	if en.Kind == "" {
		en.Kind = lineage.KindMemory
	}
	parents := en.Parents
	if parents == nil && en.Session != "" && isAgent(en.Principal) {
		ids, err := r.Context(ctx, en.Session)
		if err != nil {
			return nil, err
		}
		if len(ids) > lineage.MaxParents {
			return nil, fmt.Errorf("%w: session %s has %d entries in context, more than the %d parents an entry may name: give explicit parents",
				lineage.ErrMalformed, en.Session, len(ids), lineage.MaxParents)
		}
		for _, id := range ids {
			parents = append(parents, lineage.Parent{ID: id, Weight: 1})
		}
	}
	st := &lineage.Statement{
		Version: 1, Principal: en.Principal, Kind: en.Kind, Session: en.Session,
		ContentDigest: lineage.DigestContent(en.Content), Parents: parents, Time: lineage.FormatTime(now),
	}
	return st, st.Validate()
}

func isAgent(principal string) bool { return strings.HasPrefix(principal, "agent:") }

// Record signs an entry with signer and stores it.
func (e *Engine) Record(ctx context.Context, signer *registry.Signer, en Entry) (*lineage.Node, error) {
	st, err := e.Statement(ctx, en)
	if err != nil {
		return nil, err
	}
	signed, err := lineage.SignStatement(signer, st)
	if err != nil {
		return nil, err
	}
	var content []byte
	if en.StoreContent {
		content = en.Content
		if content == nil {
			content = []byte{}
		}
	}
	return e.graph.InsertSigned(ctx, signed, content)
}

// Insert stores an entry signed elsewhere (the server path: clients sign,
// the engine verifies).
func (e *Engine) Insert(ctx context.Context, env, content []byte) (*lineage.Node, error) {
	return e.graph.Insert(ctx, env, content)
}

// Recall puts stored entries into a session's context and appends a recall
// to the session's trajectory.
func (e *Engine) Recall(ctx context.Context, session string, ids []string) error {
	full, err := e.ResolveAll(ids)
	if err != nil {
		return err
	}
	if err := e.graph.Recall(ctx, session, full); err != nil {
		return err
	}
	_, err = e.gate.Observe(ctx, session, trajectory.Call{Tool: "memory_recall", Role: trajectory.Recall})
	return err
}

// Resolve turns an ID prefix into a full entry ID.
func (e *Engine) Resolve(prefix string) (string, error) { return e.graph.Resolve(prefix) }

// ResolveAll resolves several prefixes.
func (e *Engine) ResolveAll(prefixes []string) ([]string, error) {
	out := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		id, err := e.graph.Resolve(p)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// Call is a proposed tool call.
type Call struct {
	Principal string
	Session   string
	Tool      string
	Args      []byte // JSON object; nil for none
	// Justification is what the agent relied on (IDs or prefixes). When
	// nil, it is the session's whole context.
	Justification []string
	// ArgSources maps an argument to the entries its value came from.
	ArgSources map[string][]string
}

// CallStatement builds the signed statement of a proposed call.
func (e *Engine) CallStatement(ctx context.Context, c Call) (*lineage.Statement, map[string][]string, error) {
	return BuildCall(ctx, engineReader{e}, c, e.cfg.clock())
}

// BuildCall builds the statement of a proposed call at time now: its
// parents are its justification (the session's context when not given),
// and the argument sources are resolved to full IDs.
func BuildCall(ctx context.Context, r Reader, c Call, now time.Time) (*lineage.Statement, map[string][]string, error) {
	args, err := lineage.CanonicalArgs(c.Args)
	if err != nil {
		return nil, nil, err
	}
	just := c.Justification
	if just == nil {
		if just, err = r.Context(ctx, c.Session); err != nil {
			return nil, nil, err
		}
	}
	parents := make([]lineage.Parent, 0, len(just))
	seen := map[string]bool{}
	for _, j := range just {
		if lineage.IsID(j) {
			// A full ID needs no look-up: the gate checks that every
			// parent exists, and denies the call when one does not.
			if !seen[j] {
				seen[j] = true
				parents = append(parents, lineage.Parent{ID: j, Weight: 1})
			}
			continue
		}
		id, err := r.Resolve(ctx, j)
		if err != nil && !errors.Is(err, lineage.ErrUnknownEntry) {
			return nil, nil, err
		}
		if err != nil {
			// An unknown justification still goes to the gate, which
			// denies the call and logs why. A full ID is kept as given.
			if len(j) != 64 {
				return nil, nil, err
			}
			id = j
		}
		if !seen[id] {
			seen[id] = true
			parents = append(parents, lineage.Parent{ID: id, Weight: 1})
		}
	}
	srcs := map[string][]string{}
	for name, ids := range c.ArgSources {
		// An explicit empty list stays explicit: the agent says it composed
		// the value itself, which the policy judges apart from "no
		// provenance given".
		srcs[name] = []string{}
		for _, p := range ids {
			id, err := r.Resolve(ctx, p)
			if err != nil {
				return nil, nil, fmt.Errorf("argument %s: %w", name, err)
			}
			srcs[name] = append(srcs[name], id)
		}
	}
	st := &lineage.Statement{
		Version: 1, Principal: c.Principal, Kind: lineage.KindCall, Session: c.Session,
		ContentDigest: lineage.DigestContent(args), Parents: parents, Tool: c.Tool, Args: args,
		Time: lineage.FormatTime(now),
	}
	return st, srcs, st.Validate()
}

// Check signs a proposed call with signer and asks the gate. Its call entry
// is recorded; its ID is the parent the tool's output names.
func (e *Engine) Check(ctx context.Context, signer *registry.Signer, c Call) (*gate.Decision, error) {
	st, srcs, err := e.CallStatement(ctx, c)
	if err != nil {
		return nil, err
	}
	signed, err := lineage.SignStatement(signer, st)
	if err != nil {
		return nil, err
	}
	return e.gate.Check(ctx, gate.Request{Signed: signed, ArgSources: srcs})
}

// DefaultApprovalTTL is how long an approval stays usable.
const DefaultApprovalTTL = 15 * time.Minute

// Approve records a user's approval of a denied (or ask) decision: the next
// identical call in that session is allowed once.
// A ttl of 0 means DefaultApprovalTTL; a negative one is refused.
func (e *Engine) Approve(ctx context.Context, signer *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error) {
	if ttl < 0 {
		return nil, fmt.Errorf("%w: the approval's lifetime %s is negative", gate.ErrApproval, ttl)
	}
	if ttl == 0 {
		ttl = DefaultApprovalTTL
	}
	d, err := e.gate.Decision(decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(signer, BuildApproval(d, approver, ttl, e.cfg.clock()))
	if err != nil {
		return nil, err
	}
	return e.gate.Approve(ctx, env)
}

// BuildApproval builds an approval of decision d by approver, usable until
// now+ttl.
func BuildApproval(d *gate.Decision, approver string, ttl time.Duration, now time.Time) *lineage.Statement {
	return &lineage.Statement{
		Version: 1, Principal: approver, Kind: lineage.KindApproval, Session: d.Session,
		ContentDigest: lineage.DigestContent([]byte(d.ID)), Parents: []lineage.Parent{}, Time: lineage.FormatTime(now),
		Approval: &lineage.Grant{Decision: d.ID, Action: d.ArgsDigest, Expires: lineage.FormatTime(now.Add(ttl))},
	}
}

// Trace returns the bounded ancestry of an entry.
func (e *Engine) Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error) {
	full, err := e.graph.Resolve(id)
	if err != nil {
		return nil, err
	}
	return e.graph.Trace(ctx, full, o)
}

// Verify checks the whole store: every entry, every edge and label, the
// log over entries and decisions, and every checkpoint.
func (e *Engine) Verify(ctx context.Context) (*lineage.Report, error) {
	return e.graph.VerifyWith(ctx, lineage.VerifyOptions{Decision: e.gate.VerifyDecision, Decisions: e.gate.DecisionIDs})
}

// Checkpoint signs the log's current size and root with the operator key
// and stores the checkpoint.
func (e *Engine) Checkpoint(ctx context.Context, operator *registry.Signer) (*lineage.Checkpoint, error) {
	if !operator.Public().Equal(e.reg.OperatorKey()) {
		return nil, fmt.Errorf("%w: not the operator key of this store", registry.ErrBadKey)
	}
	size, root, err := e.graph.LogHead()
	if err != nil {
		return nil, err
	}
	cp, err := lineage.SignCheckpoint(operator, size, root, e.cfg.clock())
	if err != nil {
		return nil, err
	}
	return cp, e.graph.AddCheckpoint(ctx, cp)
}
