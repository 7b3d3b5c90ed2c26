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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pedigree-ai/pedigree"
)

// ErrNoServer means no server answers for the data directory.
var ErrNoServer = errors.New("no pedigree server is running")

// ErrServerGone: the server a client dialled stopped (its socket no longer
// answers, or it closed the connection without an answer). What the
// request asked may or may not have been done.
var ErrServerGone = errors.New("the pedigree server stopped")

// serverClosedIdle is the text of the error net/http returns when a
// POST went out on a kept-alive connection as its server closed it: a
// server stopping on demand closes its idle connections, and a client may
// be sending on one at that moment. net/http does not export the error
// (golang/go#19943) nor retry a POST on it, so it is known by its text;
// TestServerClosedIdleIsNetHTTPs fails if Go's transport stops saying it.
const serverClosedIdle = "http: server closed idle connection"

// gone says whether a request's error is its server having stopped.
func gone(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), serverClosedIdle)
}

var (
	_ pedigree.Backend         = (*Client)(nil)
	_ pedigree.Prover          = (*Client)(nil)
	_ pedigree.PlanReader      = (*Client)(nil)
	_ pedigree.ContextReferrer = (*Client)(nil)
)

// Client talks to a server over its unix socket. Entries, calls, approvals
// and checkpoints are built and signed here, with the caller's keys.
type Client struct {
	hc    *http.Client
	clock func() time.Time
	token string // the server's bearer token (see auth.go)
	// missing is the routes this build calls that the server did not list
	// when it proved it holds the token (release.go).
	missing []string

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
// ErrOtherRelease when the server is another pedigree release (release.go).
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
	// The server answers a verb, or fails it; it never sends a client
	// elsewhere, so a redirect is not followed (it would carry the token
	// to whatever route it names).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{hc: &http.Client{Transport: tr, CheckRedirect: noRedirect}, clock: clock, token: token}
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

// call sends one verb's request (see route.go).
func (c *Client) call(ctx context.Context, r request, body, out any) error {
	return c.do(ctx, r.method, r.path, body, out)
}

// UILogin asks a server started with --ui for a one-time link to its page
// (path: a page under /ui/ to land on, or empty).
func (c *Client) UILogin(ctx context.Context, path string) (string, error) {
	var out struct{ URL string }
	err := c.call(ctx, postUILogin.at(), map[string]string{"path": path}, &out)
	return out.URL, err
}
