package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Complete mediation: every message an upstream sends toward the host
// passes admit, which records what it carries as an entry of the
// upstream's tool principal in the host's session (so it joins the
// session's context and taints what the agent does next) or refuses it.
// What goes through admit:
//
//   - a tool's result, and its JSON-RPC error (errors are content): a
//     tool_output entry derived from the call, committed while the result
//     goes back (the session's next request waits for it: settled);
//   - a resource's contents, a prompt's messages, a completion's values,
//     and the upstream's error on each: a retrieval entry, stored before
//     the answer goes back;
//   - a progress notification's message: a tool_output entry derived from
//     its call, stored before it is sent on;
//   - listings (tools, prompts, resources, resource templates): each item
//     the operator did not seal as it is now (a rug pull, a list_changed,
//     a new item) is a retrieval entry, stored before the listing goes
//     back, once per session (listing.go). What the operator sealed is
//     vouched for by the seal and records nothing.
//
// What an upstream sends that has no way to the host: its initialize
// instructions, log messages (notifications/message), elicitation and
// sampling requests (the gateway's client declares neither capability),
// roots requests (answered by the gateway). A resources/updated
// notification goes only to the sessions subscribed to its exact URI, the
// host's own string, so it carries nothing the host did not send.

// errTooLarge: an answer larger than the gateway records is never forwarded,
// whatever the mode.
var errTooLarge = errors.New("the answer is too large")

// admission is one message of an upstream on its way to the host.
type admission struct {
	up   *upstream
	s    *session
	kind lineage.Kind
	// body is what the host is given of the message, as it is recorded.
	body    any
	parents []lineage.Parent
	// later commits the entry while the message goes back (a tool's
	// result or error); otherwise it is stored before admit returns.
	later bool
	// signer and principal sign the entry instead of the upstream's: the
	// agent's, for a write's bare confirmation or a file it wrote, read
	// back (confirm.go).
	signer    *registry.Signer
	principal string
}

// admit records what an upstream's message carries in the host's session
// and returns the entry's ID; the message may be forwarded only when it
// returns no error. With later, the entry is signed here and committed in
// the background: the session's next request waits for it (settled), and
// one that cannot be stored refuses the rest of the session.
func (g *Gateway) admit(ctx context.Context, a admission) (string, error) {
	body, err := json.Marshal(a.body)
	if err != nil {
		return "", err
	}
	if len(body) > MaxResultBytes {
		return "", fmt.Errorf("%w: %d bytes, more than the %d the gateway records", errTooLarge, len(body), MaxResultBytes)
	}
	parents := a.parents
	if parents == nil {
		parents = []lineage.Parent{} // what it derives from is said, never the whole context
	}
	signer, principal := a.up.signer, a.up.cfg.Principal
	if a.signer != nil {
		signer, principal = a.signer, a.principal
	}
	st, err := pedigree.BuildEntry(ctx, nil, pedigree.Entry{Principal: principal, Kind: a.kind,
		Session: a.s.id, Content: body, Parents: parents}, g.o.Now())
	if err != nil {
		return "", err
	}
	signed, err := lineage.SignStatement(signer, st)
	if err != nil {
		return "", err
	}
	if a.later {
		g.commitLater(ctx, a, signed)
	} else if err := g.insert(ctx, signed); err != nil {
		return "", err
	}
	if g.admitted != nil {
		g.admitted(a.s.id, signed.ID(), body)
	}
	return signed.ID(), nil
}

func (g *Gateway) insert(ctx context.Context, signed *lineage.Signed) error {
	if in, ok := g.o.Backend.(insertSigned); ok {
		_, err := in.Envelopes().InsertSigned(ctx, signed, nil)
		return err
	}
	_, err := g.o.Backend.Insert(ctx, signed.Envelope(), nil)
	return err
}

// commitLater commits an entry while its message goes back to the host;
// the session's next request waits until it is stored (settled). An entry
// that cannot be stored is logged, and, in enforce mode, refuses the
// session from then on.
func (g *Gateway) commitLater(ctx context.Context, a admission, signed *lineage.Signed) {
	s := a.s
	s.outMu.Lock()
	s.pending++
	s.outMu.Unlock()
	// The host's request ends when its answer is sent; the commit does not.
	bctx := context.WithoutCancel(ctx)
	g.outputs.Go(func() {
		err := g.insert(bctx, signed)
		s.outMu.Lock()
		defer s.outMu.Unlock()
		s.pending--
		s.settle.Broadcast()
		if err == nil {
			return
		}
		if g.o.Mode == Shadow {
			g.o.Log.Error("shadow: a forwarded result could not be recorded", "mode", "shadow", "upstream", a.up.cfg.Name, "session", s.id, "output", signed.ID(), "error", err)
			return
		}
		g.o.Log.Error("a tool output could not be recorded: the session is refused from here on", "upstream", a.up.cfg.Name, "session", s.id, "output", signed.ID(), "error", err)
		if s.lost == nil {
			s.lost = err
		}
	})
}

// upstreamFailed is the error the host gets for an upstream's failed
// request once admit has recorded it: the upstream's own words, after the
// gateway's.
func upstreamFailed(u *upstream, err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("pedigree: the upstream %s failed: %v", u.cfg.Name, err)}
}

// admitFailure records an upstream's failed answer to a request that is
// not a tool call (a resource read, a prompt, a completion) and returns the
// error the host gets: the upstream's words when they are recorded, a
// refusal without them when they could not be.
func (g *Gateway) admitFailure(ctx context.Context, u *upstream, s *session, err error) error {
	e := upstreamFailed(u, err)
	if _, aerr := g.admit(ctx, admission{up: u, s: s, kind: lineage.KindRetrieval, body: map[string]any{"error": e}}); aerr != nil {
		return withheld(errors.New("the upstream " + u.cfg.Name + " failed, and what it said could not be recorded: " + aerr.Error()))
	}
	return e
}

// hostSession is the pedigree session of the host session a request
// came in on.
func (g *Gateway) hostSession(req mcp.Request) (*mcp.ServerSession, *session, error) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return nil, nil, errors.New("the request has no host session")
	}
	return ss, g.session(ss), nil
}
