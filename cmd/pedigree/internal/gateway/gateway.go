package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/rollup"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Backend is what the gateway needs of a data directory: the engine itself,
// or a running server's client.
type Backend interface {
	Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, error)
	Insert(ctx context.Context, env, content []byte) (*lineage.Node, error)
	Check(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, error)
	Approve(ctx context.Context, s *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error)
	ByContent(ctx context.Context, digest string) ([]string, error)
	// Context and Show serve a long session's rollups (internal/rollup).
	Context(ctx context.Context, session string) ([]string, error)
	Show(ctx context.Context, id string) (*pedigree.EntryView, error)
	// Subject is a decision's exact call as a person is asked about it.
	Subject(ctx context.Context, decisionID string) (*gate.Pending, error)
}

// Mode says what the gateway does with a decision.
type Mode string

const (
	// Enforce refuses denied calls and asks the human on ask.
	Enforce Mode = "enforce"
	// Shadow forwards every call and logs what enforce would have done.
	Shadow Mode = "shadow"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Enforce, Shadow:
		return Mode(s), nil
	}
	return "", fmt.Errorf("mode %q: want enforce or shadow", s)
}

// Options configure a gateway.
type Options struct {
	Backend Backend
	// Agent signs calls, the agent's memory and each session's start.
	Agent *registry.Signer
	// Unverified signs memory content of unknown provenance.
	Unverified *registry.Signer
	// Tools holds the signer of each upstream's tool principal.
	Tools map[string]*registry.Signer
	// Approver, when set, signs the approval of an ask the human accepts.
	Approver   *registry.Signer
	ApproverID string
	// ApproveHint is the command a person runs to approve a refused call,
	// with DECISION_ID where the decision goes.
	ApproveHint string
	// PageHint is the command that opens the page where a person sees a
	// refused call's ancestry drawn and decides on it, with DECISION_ID
	// where the decision goes.
	PageHint string
	Mode     Mode
	Log      *slog.Logger
	// Stderr receives the upstreams' stderr (default: discarded).
	Stderr io.Writer
	// WithholdEnv names the variables of this process's environment the
	// upstreams do not inherit: the credentials of the Approver's key and
	// of the operator's (registry.CredentialEnv), which would let an
	// upstream sign as them. An upstream's own Env still sets them.
	WithholdEnv []string
	// Now is the clock (request state expiry).
	Now func() time.Time
	// Version is the gateway's version, as it introduces itself.
	Version string
	// Drift, when set, is told what each upstream offers and how it
	// differs from the metadata the operator sealed (at start, and after
	// a list_changed).
	Drift func(upstream string, now *Metadata, changes []Change)
	// Bind, when set, names the host's own session a call (the tool's
	// exposed name and canonical arguments) belongs to, or "": the Claude Code hook
	// binds each call it checked (hook.GatewaySession), so that the
	// gateway decides on, and records into, the same session as the hook.
	Bind func(key string, canon []byte) string
}

// Gateway is one MCP server in front of every upstream.
type Gateway struct {
	o         Options
	server    *mcp.Server
	upstreams []*upstream
	stateKey  []byte
	// life ends at Close: the context of the gateway's own work.
	life context.Context
	stop context.CancelFunc
	// toolsMu guards the upstreams' tool lists and the server's tools.
	toolsMu sync.Mutex

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	// bound are the host's sessions calls were bound to (Options.Bind),
	// and pinned the one each connection's latest bound call went to.
	bound  map[string]*session
	pinned map[*mcp.ServerSession]*session
	used   map[string]time.Time // request-state nonces already used
	// progress maps the token the gateway gave an upstream call to the
	// host's request that asked for progress (passthrough.go).
	progress map[string]progressRoute
	nextTok  uint64
	// subs are the host sessions subscribed to each resource URI, and
	// owners the upstream that offers each resource, template and prompt.
	subs   map[string]map[*mcp.ServerSession]bool
	owners owners

	// rollups are the long sessions' rollups (internal/rollup): a call
	// names at most lineage.MaxParents parents, a session's context grows
	// past that.
	rollups rollup.InMemory

	// outputs are the tool outputs being committed (Close waits for them).
	outputs sync.WaitGroup
	// waiting, in tests, is told when a request waits for outputs.
	waiting func()
	// admitted, in tests, is told of every entry admit records.
	admitted func(session, id string, body []byte)

	// vouchMu guards what the operator's seal vouches for (listing.go).
	vouchMu sync.Mutex
	vouch   vouching
}

type upstream struct {
	cfg    Upstream
	signer *registry.Signer
	client *mcp.ClientSession
	tools  []*mcp.Tool
	cmd    *exec.Cmd
	// prompts, resources and templates are the upstream's, read at start.
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
}

// New starts every upstream, reads its tools and builds the server. Close
// stops the upstreams.
func New(ctx context.Context, ups []Upstream, o Options) (*Gateway, error) {
	if o.Backend == nil || o.Agent == nil || o.Unverified == nil {
		return nil, errors.New("gateway: a backend, the agent's key and the unverified key are required")
	}
	if o.Mode == "" {
		o.Mode = Enforce
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return nil, err
	}
	if (o.Approver == nil) != (o.ApproverID == "") {
		return nil, errors.New("gateway: an approver needs both its principal and its key")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	g := &Gateway{o: o, stateKey: key, sessions: map[*mcp.ServerSession]*session{}, bound: map[string]*session{}, pinned: map[*mcp.ServerSession]*session{}, used: map[string]time.Time{},
		progress: map[string]progressRoute{}, subs: map[string]map[*mcp.ServerSession]bool{}, owners: newOwners()}
	g.life, g.stop = context.WithCancel(context.WithoutCancel(ctx))
	for _, cfg := range ups {
		s := o.Tools[cfg.Principal]
		if s == nil {
			g.Close()
			return nil, fmt.Errorf("gateway: no key for %s", cfg.Principal)
		}
		u, err := g.connect(ctx, cfg, s)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.upstreams = append(g.upstreams, u)
	}
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	so := &mcp.ServerOptions{
		Logger:       o.Log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	}
	g.passThrough(so)
	g.server = mcp.NewServer(&mcp.Implementation{Name: "pedigree", Version: o.Version}, so)
	g.server.AddReceivingMiddleware(g.mediateListings)
	ts := g.tools()
	g.vouchTools(ts)
	for _, t := range ts {
		g.server.AddTool(t.exposed, g.handler(t))
	}
	g.offerExtras(ctx)
	for _, u := range g.upstreams {
		g.reportDrift(u)
	}
	return g, nil
}

// reportDrift tells the operator (Options.Drift, the log) how what an
// upstream offers differs from what was sealed.
func (g *Gateway) reportDrift(u *upstream) {
	now := u.metadata()
	changes := Diff(u.cfg.Metadata, now)
	if g.o.Drift != nil {
		g.o.Drift(u.cfg.Name, now, changes)
	}
	if len(changes) == 0 {
		return
	}
	g.o.Log.Warn("an upstream offers metadata that differs from the operator's seal: every session records it as the upstream's content",
		"upstream", u.cfg.Name, "changes", fmt.Sprint(changes))
}

// metadata is what the upstream offers now.
func (u *upstream) metadata() *Metadata {
	md := &Metadata{Tools: u.tools, Prompts: u.prompts, Resources: u.resources, Templates: u.templates}
	if md.Tools == nil {
		md.Tools = []*mcp.Tool{}
	}
	return md
}

// Connect starts an upstream's command and reads its tools: what `mcp add`
// does once, and the gateway at start.
func Connect(ctx context.Context, cfg Upstream, stderr io.Writer) (*mcp.ClientSession, []*mcp.Tool, error) {
	cs, tools, _, err := connect(ctx, cfg, stderr, nil, nil)
	return cs, tools, err
}

// connect starts an upstream; opts, when set, are the client's handlers of
// what the upstream tells the gateway.
func connect(ctx context.Context, cfg Upstream, stderr io.Writer, opts *mcp.ClientOptions, withhold []string) (*mcp.ClientSession, []*mcp.Tool, *exec.Cmd, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = append(upstreamEnv(os.Environ(), withhold), cfg.Env...)
	if stderr == nil {
		stderr = io.Discard
	}
	cmd.Stderr = stderr
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "pedigree-gateway", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("upstream %s: %w", cfg.Name, err)
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			cs.Close()
			return nil, nil, nil, fmt.Errorf("upstream %s: tools/list: %w", cfg.Name, err)
		}
		tools = append(tools, t)
	}
	return cs, tools, cmd, nil
}

// upstreamEnv is env without the variables withhold names.
func upstreamEnv(env, withhold []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(withhold, name) {
			out = append(out, kv)
		}
	}
	return out
}

func (g *Gateway) connect(ctx context.Context, cfg Upstream, s *registry.Signer) (*upstream, error) {
	u := &upstream{cfg: cfg, signer: s}
	cs, tools, cmd, err := connect(ctx, cfg, g.o.Stderr, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { go g.refresh(u, req.Session) },
		// The upstream's progress and resource updates go to the host
		// sessions that asked for them (passthrough.go).
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) { g.progressed(ctx, req.Params) },
		ResourceUpdatedHandler:      func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) { g.updated(ctx, u, req.Params) },
	}, g.o.WithholdEnv)
	if err != nil {
		return nil, err
	}
	g.o.Log.Info("upstream connected", "upstream", cfg.Name, "tools", len(tools))
	g.toolsMu.Lock()
	u.client, u.tools, u.cmd = cs, tools, cmd
	g.toolsMu.Unlock()
	return u, nil
}

// refresh reads an upstream's tools again after it said they changed, and
// offers the new list (the SDK tells the clients). A new tool has no
// catalog entry until the operator writes one, so the gate treats it as
// sensitive.
func (g *Gateway) refresh(u *upstream, cs *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(g.life, 30*time.Second)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			g.o.Log.Error("upstream tools/list after list_changed", "upstream", u.cfg.Name, "error", err)
			return
		}
		tools = append(tools, t)
	}
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	if g.server == nil {
		// Still starting (an upstream may say so right after
		// initialize): New offers the tools read here.
		u.tools = tools
		return
	}
	before := g.tools()
	u.tools = tools
	after := g.tools()
	keep := map[string]bool{}
	for _, t := range after {
		keep[t.exposed.Name] = true
	}
	var gone []string
	for _, t := range before {
		if !keep[t.exposed.Name] {
			gone = append(gone, t.exposed.Name)
		}
	}
	g.vouchTools(after)
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	for _, t := range after {
		g.server.AddTool(t.exposed, g.handler(t))
	}
	g.o.Log.Info("upstream tools changed", "upstream", u.cfg.Name, "tools", len(tools))
	g.reportDrift(u)
}

// tool is one tool the gateway offers.
type tool struct {
	up      *upstream
	name    string // the upstream's name for it
	key     string // its catalog key, NAME.TOOL
	exposed *mcp.Tool
}

// tools names every upstream's tools: the upstream's name when no other
// upstream has a tool of that name, else NAME__TOOL.
func (g *Gateway) tools() []tool {
	count := map[string]int{}
	for _, u := range g.upstreams {
		for _, t := range u.tools {
			count[t.Name]++
		}
	}
	var out []tool
	for _, u := range g.upstreams {
		for _, t := range u.tools {
			e := *t
			if count[t.Name] > 1 {
				e.Name = u.cfg.Name + "__" + t.Name
			}
			if e.InputSchema == nil {
				e.InputSchema = map[string]any{"type": "object"}
			}
			if !offerable(&e) {
				continue
			}
			out = append(out, tool{up: u, name: t.Name, key: CatalogKey(u.cfg.Name, t.Name), exposed: &e})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].exposed.Name < out[j].exposed.Name })
	return out
}

// offerable reports whether the SDK takes a tool: its input schema must
// be a JSON object of type object (the SDK panics on anything else, and an
// upstream must not be able to stop the gateway with a bad schema), its
// output schema JSON.
func offerable(t *mcp.Tool) bool {
	var in map[string]any
	if b, err := json.Marshal(t.InputSchema); err != nil || json.Unmarshal(b, &in) != nil || in["type"] != "object" {
		return false
	}
	if t.OutputSchema != nil {
		if _, err := json.Marshal(t.OutputSchema); err != nil {
			return false
		}
	}
	return true
}

// Close stops the upstreams, once the outputs being recorded are stored.
func (g *Gateway) Close() error {
	g.outputs.Wait()
	g.stop()
	var errs []error
	for _, u := range g.upstreams {
		if u.client == nil {
			continue
		}
		if err := u.client.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// session is the pedigree session of one MCP session.
type session struct {
	id       string
	mu       sync.Mutex
	started  bool
	protocol string
	// listed are the digests of the metadata items not vouched for by the
	// seal that this session has recorded (listing.go).
	listMu sync.Mutex
	listed map[string]bool

	// The session's tool outputs being committed: a result goes back to
	// the host while its output entry is committed, and the session's next
	// request waits for it (settled). lost is the first output that could
	// not be stored: the session is refused from then on.
	outMu   sync.Mutex
	settle  *sync.Cond
	pending int
	lost    error
}

// callSession is the session a call belongs to: the host's own, when the
// host's hook bound the call to it (Options.Bind), or bound an earlier call
// of this connection to it; else the connection's. A connection that has
// recorded in a session of its own is never bound: a host whose context is
// tainted cannot move its calls into a cleaner one by repeating a call the
// hook bound.
func (g *Gateway) callSession(ss *mcp.ServerSession, t tool, canon []byte) *session {
	if g.o.Bind == nil {
		return g.session(ss)
	}
	g.mu.Lock()
	own, hasOwn := g.sessions[ss]
	pinned := g.pinned[ss]
	g.mu.Unlock()
	if hasOwn {
		own.mu.Lock()
		started := own.started
		own.mu.Unlock()
		if started {
			return own
		}
	}
	id := g.o.Bind(t.exposed.Name, canon)
	if id == "" || len(id) > lineage.MaxSessionLen {
		if pinned == nil {
			return g.session(ss)
		}
		return pinned
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.bound[id]
	if !ok {
		s = &session{id: id}
		s.settle = sync.NewCond(&s.outMu)
		g.bound[id] = s
	}
	if _, ok := g.pinned[ss]; !ok {
		go func() { // forget the pin when the connection ends
			ss.Wait()
			g.mu.Lock()
			delete(g.pinned, ss)
			g.mu.Unlock()
		}()
	}
	g.pinned[ss] = s
	return s
}

func (g *Gateway) session(ss *mcp.ServerSession) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sessions[ss]; ok {
		return s
	}
	b := make([]byte, 12)
	rand.Read(b)
	s := &session{id: "mcp-" + hex.EncodeToString(b)}
	s.settle = sync.NewCond(&s.outMu)
	g.sessions[ss] = s
	// Forget the session when it ends (streamable HTTP has many).
	go func() {
		ss.Wait()
		g.mu.Lock()
		delete(g.sessions, ss)
		g.mu.Unlock()
		g.unsubscribeAll(ss)
	}()
	return s
}

// settled waits until every tool output the session has returned to the
// host is stored, and fails when one could not be. Every request of a
// session that decides or records (a call, a resource read, a prompt) waits
// here first, so nothing the agent does after seeing a result is decided
// without that result in its context: its taint is never missed.
func (g *Gateway) settled(s *session) error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.pending > 0 && g.waiting != nil {
		g.waiting()
	}
	for s.pending > 0 {
		s.settle.Wait()
	}
	if s.lost != nil {
		return fmt.Errorf("the output of an earlier call in this session could not be recorded (%v), so the session is refused from here on", s.lost)
	}
	return nil
}

// earlyChecker is the engine's own check that returns an allow of a tool
// that is not sensitive before it is stored (see checkEarly).
type earlyChecker interface {
	CheckEarly(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, func() error, error)
}

// insertSigned is the engine's own insert of an entry this process signed
// (it skips verifying the signature just made), on its Envelopes view.
type insertSigned interface {
	Envelopes() *pedigree.Envelopes
}
