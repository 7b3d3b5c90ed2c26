package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// ErrNoServer means no server answers for the data directory.
var ErrNoServer = errors.New("no pedigree server is running")

// ErrServerGone: the server a client dialled stopped (its socket no longer
// answers, or it closed the connection without an answer). What the
// request asked may or may not have been done.
var ErrServerGone = errors.New("the pedigree server stopped")

// gone says whether a request's error is its server having stopped.
func gone(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

var (
	_ pedigree.Backend = (*Client)(nil)
	_ pedigree.Prover  = (*Client)(nil)
)

// Client talks to a server over its unix socket. Entries, calls, approvals
// and checkpoints are built and signed here, with the caller's keys.
type Client struct {
	hc    *http.Client
	clock func() time.Time
	token string // the server's bearer token (see auth.go)
	// protocol is what the server said it speaks when it proved it holds
	// the token (protocol.go).
	protocol int

	// frozen is the registry once the server reported it frozen: a frozen
	// registry never changes again (nothing adds, removes or rekeys a
	// principal after freeze), so it is read once a client, not once a
	// question (a hook event asked for it three times).
	mu     sync.Mutex
	frozen *pedigree.RegistryView
}

// Dial finds the server of a data directory (through serve.json), checks
// that it may be trusted and that it answers. ErrNoServer when none
// answers; ErrUntrustedServer when serve.json names a socket that is not
// the directory's own or a server that cannot prove it holds the token;
// ErrOtherRelease when the server is another pedigree release (protocol.go).
func Dial(ctx context.Context, dir string, clock func() time.Time) (*Client, error) {
	return sameRelease(dialAnyRelease(ctx, dir, clock))
}

// dialAnyRelease is Dial without the release check: enough to stop a
// server started on demand, whatever release it is.
func dialAnyRelease(ctx context.Context, dir string, clock func() time.Time) (*Client, string, error) {
	socket, err := discover(dir)
	if err != nil {
		return nil, "", err
	}
	token, err := ReadToken(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrUntrustedServer, err)
	}
	c, err := dialSocket(ctx, socket, token, clock)
	return c, socket, err
}

// DialSocket connects to a server's unix socket and checks, before it sends
// anything else, that the server holds token and is this release.
func DialSocket(ctx context.Context, socket, token string, clock func() time.Time) (*Client, error) {
	c, err := dialSocket(ctx, socket, token, clock)
	return sameRelease(c, socket, err)
}

func dialSocket(ctx context.Context, socket, token string, clock func() time.Time) (*Client, error) {
	if clock == nil {
		clock = time.Now
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 64,
	}
	c := &Client{hc: &http.Client{Transport: tr}, clock: clock, token: token}
	if err := c.prove(ctx, socket); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+clientHost+path, rd)
	if err != nil {
		return err
	}
	c.authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if gone(err) {
			return fmt.Errorf("pedigree server: %w: %w", ErrServerGone, err)
		}
		return fmt.Errorf("pedigree server: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e errorResponse
		if json.Unmarshal(b, &e) != nil {
			return &RemoteError{Status: resp.StatusCode, Kind: "internal", Msg: string(b)}
		}
		return &RemoteError{Status: resp.StatusCode, Kind: e.Kind, Msg: e.Error}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Context is a session's context, as the server has it.
func (c *Client) Context(ctx context.Context, session string) ([]string, error) {
	var out struct{ IDs []string }
	err := c.do(ctx, "GET", "/v1/context/"+url.PathEscape(session), nil, &out)
	return out.IDs, err
}

// ContextRef names a session's whole context by reference, as the server
// has it now (nil for an empty context): the client is a
// pedigree.ContextReferrer, so a call whose justification is the default
// names its context by reference, and the server checks the reference
// against its context rows when it stores the call.
func (c *Client) ContextRef(ctx context.Context, session string) (*lineage.ContextRef, error) {
	var out struct{ Context *lineage.ContextRef }
	err := c.do(ctx, "GET", "/v1/context-ref/"+url.PathEscape(session), nil, &out)
	return out.Context, err
}

// Resolve turns an ID prefix into a full ID, as the server has it.
func (c *Client) Resolve(ctx context.Context, prefix string) (string, error) {
	var out struct{ ID string }
	err := c.do(ctx, "GET", "/v1/resolve/"+url.PathEscape(prefix), nil, &out)
	return out.ID, err
}

// ByContent returns the memory entries whose content digest is digest.
func (c *Client) ByContent(ctx context.Context, digest string) ([]string, error) {
	var out struct{ IDs []string }
	err := c.do(ctx, "GET", "/v1/content/"+url.PathEscape(digest), nil, &out)
	return out.IDs, err
}

// Registry returns the registry as the server has it. Once it is frozen it
// is read from the server once: later calls return a copy of that view.
func (c *Client) Registry(ctx context.Context) (*pedigree.RegistryView, error) {
	c.mu.Lock()
	f := c.frozen
	c.mu.Unlock()
	if f != nil {
		v := *f
		v.Principals = slices.Clone(f.Principals)
		return &v, nil
	}
	v, err := c.readRegistry(ctx)
	if err != nil || !v.Frozen {
		return v, err
	}
	keep := *v
	keep.Principals = slices.Clone(v.Principals)
	c.mu.Lock()
	c.frozen = &keep
	c.mu.Unlock()
	return v, nil
}

func (c *Client) readRegistry(ctx context.Context) (*pedigree.RegistryView, error) {
	var out registryResponse
	if err := c.do(ctx, "GET", "/v1/registry", nil, &out); err != nil {
		return nil, err
	}
	v := &pedigree.RegistryView{Frozen: out.Frozen, Tau: out.Tau, Principals: []registry.Principal{}, FreezeDigest: out.FreezeDigest, TrustRoot: out.TrustRoot}
	if out.OperatorKey != "" {
		k, err := registry.ParsePublicKey([]byte(out.OperatorKey))
		if err != nil {
			return nil, fmt.Errorf("registry: operator key: %w", err)
		}
		v.OperatorKey = k
	}
	if out.MaxApprovalTTL != "" {
		d, err := time.ParseDuration(out.MaxApprovalTTL)
		if err != nil {
			return nil, fmt.Errorf("registry: approval cap %q: %w", out.MaxApprovalTTL, err)
		}
		v.MaxApprovalTTL = d
	}
	for _, p := range out.Principals {
		pub, err := registry.ParsePrincipalKey([]byte(p.PublicKey))
		if err != nil {
			return nil, err
		}
		v.Principals = append(v.Principals, registry.Principal{ID: p.ID, Tier: p.Tier, PublicKey: pub, Approver: p.Approver})
	}
	return v, nil
}

// Record builds and signs an entry here and stores it there.
func (c *Client) Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, error) {
	st, err := pedigree.BuildEntry(ctx, c, en, c.clock())
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, st)
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
	return c.Insert(ctx, env, content)
}

// Insert stores an entry signed elsewhere.
func (c *Client) Insert(ctx context.Context, env, content []byte) (*lineage.Node, error) {
	var n lineage.Node
	if err := c.do(ctx, "POST", "/v1/entries", insertRequest{Envelope: env, Content: content}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Recall recalls entries into a session.
func (c *Client) Recall(ctx context.Context, session string, ids []string) error {
	return c.do(ctx, "POST", "/v1/recall", recallRequest{Session: session, IDs: ids}, nil)
}

// Check builds and signs the call here and asks the server's gate.
func (c *Client) Check(ctx context.Context, s *registry.Signer, call pedigree.Call) (*gate.Decision, error) {
	st, srcs, err := pedigree.BuildCall(ctx, c, call, c.clock())
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, st)
	if err != nil {
		return nil, err
	}
	var d gate.Decision
	if err := c.do(ctx, "POST", "/v1/check", checkRequest{Call: env, ArgSources: srcs}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Decision returns a logged decision.
func (c *Client) Decision(ctx context.Context, id string) (*gate.Decision, error) {
	var d gate.Decision
	if err := c.do(ctx, "GET", "/v1/decisions/"+url.PathEscape(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Reevaluate asks the server to evaluate a logged decision again.
func (c *Client) Reevaluate(ctx context.Context, decisionID string) (*pedigree.Reevaluation, error) {
	var re pedigree.Reevaluation
	if err := c.do(ctx, "GET", "/v1/decisions/"+url.PathEscape(decisionID)+"/reevaluate", nil, &re); err != nil {
		return nil, err
	}
	return &re, nil
}

// Approve builds and signs the approval here.
func (c *Client) Approve(ctx context.Context, s *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error) {
	if ttl < 0 {
		return nil, fmt.Errorf("%w: the approval's lifetime %s is negative", gate.ErrApproval, ttl)
	}
	if ttl == 0 {
		ttl = pedigree.DefaultApprovalTTL
	}
	d, err := c.Decision(ctx, decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, pedigree.BuildApproval(d, approver, ttl, c.clock()))
	if err != nil {
		return nil, err
	}
	var n lineage.Node
	if err := c.do(ctx, "POST", "/v1/approvals", approveRequest{Envelope: env}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Reject builds and signs the rejection here.
func (c *Client) Reject(ctx context.Context, s *registry.Signer, rejecter, decisionID string) (*lineage.Node, error) {
	d, err := c.Decision(ctx, decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, pedigree.BuildRejection(d, rejecter, c.clock()))
	if err != nil {
		return nil, err
	}
	var n lineage.Node
	if err := c.do(ctx, "POST", "/v1/rejections", approveRequest{Envelope: env}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Plan reads a stored plan through the server, for BuildCall; the gate
// reads it again from its own store.
func (c *Client) Plan(ctx context.Context, id string) (*lineage.Statement, error) {
	v, err := c.Show(ctx, id)
	if err != nil {
		return nil, err
	}
	st, _, _, err := lineage.Open(v.Envelope)
	return st, err
}

var (
	_ pedigree.PlanReader      = (*Client)(nil)
	_ pedigree.ContextReferrer = (*Client)(nil)
)

// Pending lists the decisions a person can still approve or reject.
func (c *Client) Pending(ctx context.Context) ([]gate.Pending, error) {
	var out struct{ Pending []gate.Pending }
	err := c.do(ctx, "GET", "/v1/pending", nil, &out)
	return out.Pending, err
}

// Subject is one logged decision as a person reviews it.
func (c *Client) Subject(ctx context.Context, decisionID string) (*gate.Pending, error) {
	var p gate.Pending
	if err := c.do(ctx, "GET", "/v1/decisions/"+url.PathEscape(decisionID)+"/subject", nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Reviews lists approvals and rejections of decisions.
func (c *Client) Reviews(ctx context.Context) ([]gate.Review, error) {
	var out struct{ Reviews []gate.Review }
	err := c.do(ctx, "GET", "/v1/reviews", nil, &out)
	return out.Reviews, err
}

// Decisions lists the decision log.
func (c *Client) Decisions(ctx context.Context, q pedigree.DecisionQuery) ([]gate.Decision, error) {
	var out struct{ Decisions []gate.Decision }
	path := "/v1/decisions?limit=" + strconv.Itoa(q.Limit)
	if q.Session != "" {
		path += "&session=" + url.QueryEscape(q.Session)
	}
	err := c.do(ctx, "GET", path, nil, &out)
	return out.Decisions, err
}

// Show returns one entry as stored, with its signature checked again.
func (c *Client) Show(ctx context.Context, id string) (*pedigree.EntryView, error) {
	var v pedigree.EntryView
	if err := c.do(ctx, "GET", "/v1/entries/"+url.PathEscape(id), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Trace returns an entry's bounded ancestry.
func (c *Client) Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error) {
	var tr traceResponse
	q := fmt.Sprintf("/v1/trace/%s?max_depth=%d&max_nodes=%d", url.PathEscape(id), o.MaxDepth, o.MaxNodes)
	if err := c.do(ctx, "GET", q, nil, &tr); err != nil {
		return nil, err
	}
	return &lineage.Trace{Root: tr.Root, Nodes: tr.Nodes, Edges: tr.Edges, Untrusted: tr.Untrusted, Truncated: tr.Truncated}, nil
}

// Verify asks the server to verify its store.
func (c *Client) Verify(ctx context.Context) (*lineage.Report, error) {
	var r lineage.Report
	if err := c.do(ctx, "POST", "/v1/verify", struct{}{}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Trajectory returns a session's trajectory with its calls and alerts.
func (c *Client) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	var out trajectoryResponse
	if err := c.do(ctx, "GET", "/v1/trajectory/"+url.PathEscape(session), nil, &out); err != nil {
		return nil, err
	}
	st := out.State
	st.Calls, st.Alerts = out.Calls, out.Alerts
	return &st, nil
}

// Checkpoint signs the server's log head here with the operator key.
func (c *Client) Checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error) {
	var head headResponse
	if err := c.do(ctx, "GET", "/v1/log/head", nil, &head); err != nil {
		return nil, err
	}
	cp, err := tlog.SignCheckpoint(operator, head.Size, head.Root, c.clock())
	if err != nil {
		return nil, err
	}
	var stored tlog.Checkpoint
	if err := c.do(ctx, "POST", "/v1/log/checkpoints", checkpointRequest{Checkpoint: *cp}, &stored); err != nil {
		return nil, err
	}
	return &stored, nil
}

// VerifyCheckpoints asks the server to verify its store, and that it
// extends each of cps (checkpoints kept elsewhere).
func (c *Client) VerifyCheckpoints(ctx context.Context, cps []tlog.Checkpoint) (*lineage.Report, error) {
	var r lineage.Report
	if err := c.do(ctx, "POST", "/v1/verify", verifyRequest{Checkpoints: cps}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ProveAgainst returns an inclusion proof against a checkpoint kept
// elsewhere, verified here against that checkpoint, not the server's copy.
func (c *Client) ProveAgainst(ctx context.Context, id string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error) {
	var p tlog.InclusionProof
	if err := c.do(ctx, "POST", "/v1/log/prove-against", proveAgainstRequest{ID: id, Checkpoint: *cp}, &p); err != nil {
		return nil, err
	}
	p.Checkpoint = *cp
	if err := p.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", tlog.ErrNotExtension, err)
	}
	return &p, nil
}

// ConsistencyFrom returns a consistency proof from a checkpoint kept
// elsewhere, verified here against that checkpoint.
func (c *Client) ConsistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error) {
	var p tlog.ConsistencyProof
	if err := c.do(ctx, "POST", "/v1/log/consistency-from", consistencyFromRequest{Checkpoint: *old, New: newSize}, &p); err != nil {
		return nil, err
	}
	p.Old = *old
	if err := p.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", tlog.ErrNotExtension, err)
	}
	return &p, nil
}

// Prove returns a verified inclusion proof (verified again here).
func (c *Client) Prove(ctx context.Context, id string, size uint64) (*tlog.InclusionProof, error) {
	var p tlog.InclusionProof
	if err := c.do(ctx, "GET", fmt.Sprintf("/v1/log/prove/%s?checkpoint=%d", url.PathEscape(id), size), nil, &p); err != nil {
		return nil, err
	}
	return &p, p.Verify()
}

// Consistency returns a verified consistency proof (verified again here).
func (c *Client) Consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error) {
	var p tlog.ConsistencyProof
	if err := c.do(ctx, "GET", fmt.Sprintf("/v1/log/consistency?old=%d&new=%d", oldSize, newSize), nil, &p); err != nil {
		return nil, err
	}
	return &p, p.Verify()
}

// Refusals lists the server's refusal log, oldest first (limit > 0: the
// last limit).
func (c *Client) Refusals(ctx context.Context, limit int) ([]pedigree.Refusal, error) {
	var out refusalsResponse
	if err := c.do(ctx, "GET", "/v1/refusals?limit="+strconv.Itoa(limit), nil, &out); err != nil {
		return nil, err
	}
	if out.Refusals == nil {
		out.Refusals = []pedigree.Refusal{}
	}
	return out.Refusals, nil
}

// UILogin asks a server started with --ui for a one-time link to its page
// (path: a page under /ui/ to land on, or empty).
func (c *Client) UILogin(ctx context.Context, path string) (string, error) {
	var out struct{ URL string }
	err := c.do(ctx, "POST", uiLoginAPI, map[string]string{"path": path}, &out)
	return out.URL, err
}
