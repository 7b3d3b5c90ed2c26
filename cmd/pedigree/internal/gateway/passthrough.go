package gateway

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree/lineage"
)

// What passes through the gateway besides calls, reads and prompts:
// progress, cancellation, resource subscriptions and completions. What
// carries an upstream's text goes through admit (mediate.go): a progress
// notification's message and a completion's values (or its error) are
// recorded in the session before the host has them. A resource's "updated"
// signal carries only the URI the host subscribed to.
//
// Cancellation needs no code here: the SDK cancels a handler's context when
// the host sends notifications/cancelled, and the upstream call made with
// that context sends notifications/cancelled on to the upstream. A call
// cancelled before it is forwarded is not forwarded; one cancelled after
// keeps its call entry and its allow decision (it was sent: the upstream
// may have acted) and has no tool_output (the host received no result, so
// nothing entered the session's context).

// progressRoute is the host request an upstream's progress goes back to.
type progressRoute struct {
	ctx   context.Context // the host request's (streamable HTTP sends on its stream)
	ss    *mcp.ServerSession
	token any // the host's own progress token
	// s, up and call say where a progress message is recorded: the
	// session, the upstream's principal, and the call it derives from.
	s    *session
	up   *upstream
	call string
}

// owners says which upstream offers each resource, resource template and
// prompt the gateway mirrors.
type owners struct {
	resources map[string]*upstream
	templates []ownedTemplate
	prompts   map[string]ownedPrompt // by the name the gateway offers
}

type ownedTemplate struct {
	template string
	up       *upstream
}

type ownedPrompt struct {
	up   *upstream
	name string // the upstream's name for it
}

func newOwners() owners {
	return owners{resources: map[string]*upstream{}, prompts: map[string]ownedPrompt{}}
}

// resource is the upstream that offers a URI: the one that lists it, else
// the one whose template's literal prefix it starts with (the longest).
func (o owners) resource(uri string) *upstream {
	if u, ok := o.resources[uri]; ok {
		return u
	}
	var best *upstream
	n := -1
	for _, t := range o.templates {
		prefix, _, _ := strings.Cut(t.template, "{")
		if strings.HasPrefix(uri, prefix) && len(prefix) > n {
			best, n = t.up, len(prefix)
		}
	}
	return best
}

// passThrough offers the host what at least one upstream offers:
// subscriptions when an upstream's resources can be subscribed to,
// completions when an upstream completes.
func (g *Gateway) passThrough(so *mcp.ServerOptions) {
	var subscribe, complete bool
	for _, u := range g.upstreams {
		caps := u.capabilities()
		if caps == nil {
			continue
		}
		subscribe = subscribe || caps.Resources != nil && caps.Resources.Subscribe
		complete = complete || caps.Completions != nil
	}
	if subscribe {
		so.SubscribeHandler = g.subscribe
		so.UnsubscribeHandler = g.unsubscribe
	}
	if complete {
		so.CompletionHandler = g.complete
	}
}

// withProgress gives the upstream call a progress token of the gateway's
// own when the host asked for progress, and routes what comes back under
// it to the host's token; done forgets the route. Tokens are the
// gateway's because two host sessions may use the same one.
func (g *Gateway) withProgress(ctx context.Context, req *mcp.CallToolRequest, params *mcp.CallToolParams, s *session, u *upstream, call string) (done func()) {
	host := req.Params.GetProgressToken()
	if host == nil {
		return func() {}
	}
	g.mu.Lock()
	g.nextTok++
	tok := "pedigree-" + strconv.FormatUint(g.nextTok, 10)
	g.progress[tok] = progressRoute{ctx: ctx, ss: req.Session, token: host, s: s, up: u, call: call}
	g.mu.Unlock()
	params.SetProgressToken(tok)
	return func() {
		g.mu.Lock()
		delete(g.progress, tok)
		g.mu.Unlock()
	}
}

// progressed sends an upstream's progress notification to the host request
// whose call it belongs to. Progress under a token the gateway did not give,
// or that reaches the gateway after the call's result went back, is
// dropped (the protocol ends progress with the result). A message is
// recorded first, derived from its call; one that cannot be is dropped.
func (g *Gateway) progressed(_ context.Context, p *mcp.ProgressNotificationParams) {
	tok, _ := p.ProgressToken.(string)
	g.mu.Lock()
	r, ok := g.progress[tok]
	g.mu.Unlock()
	if !ok {
		return
	}
	out := *p
	out.ProgressToken = r.token
	stripKeys(out.Meta)
	if out.Message != "" || len(out.Meta) > 0 {
		carried := map[string]any{"progress": out.Message, "_meta": out.Meta}
		if _, err := g.admit(context.WithoutCancel(r.ctx), admission{up: r.up, s: r.s, kind: lineage.KindToolOutput, body: carried,
			parents: []lineage.Parent{{ID: r.call, Weight: 1}}}); err != nil {
			g.o.Log.Warn("a progress message could not be recorded: it is dropped", "upstream", r.up.cfg.Name, "session", r.s.id, "error", err)
			return
		}
	}
	if err := r.ss.NotifyProgress(r.ctx, &out); err != nil {
		g.o.Log.Debug("progress not delivered to the host", "error", err)
	}
}

// subscribe subscribes the host session to a resource: the first
// subscriber of a URI subscribes the gateway at its upstream.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	u := g.owners.resource(req.Params.URI)
	if u == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("pedigree: no upstream offers %s", req.Params.URI)}
	}
	s := g.session(req.Session) // forgotten, with its subscriptions, when it ends
	g.mu.Lock()
	first := len(g.subs[req.Params.URI]) == 0
	g.mu.Unlock()
	if first {
		if err := u.client.Subscribe(ctx, &mcp.SubscribeParams{URI: req.Params.URI}); err != nil {
			if serr := g.start(ctx, s, req.Session); serr != nil {
				return withheld(serr)
			}
			return g.admitFailure(ctx, u, s, err) // what the upstream said is content
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.subs[req.Params.URI] == nil {
		g.subs[req.Params.URI] = map[*mcp.ServerSession]bool{}
	}
	g.subs[req.Params.URI][req.Session] = true
	return nil
}

func (g *Gateway) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	g.drop(req.Session, req.Params.URI)
	return nil
}

// drop removes a host session's subscription; the last one out
// unsubscribes the gateway at the upstream. (A 2026-07-28 subscription
// ends when its listen stream is cancelled, so this does not use the
// request's context.)
func (g *Gateway) drop(ss *mcp.ServerSession, uri string) {
	g.mu.Lock()
	subs := g.subs[uri]
	if !subs[ss] {
		g.mu.Unlock()
		return
	}
	delete(subs, ss)
	last := len(subs) == 0
	if last {
		delete(g.subs, uri)
	}
	g.mu.Unlock()
	if u := g.owners.resource(uri); last && u != nil {
		ctx, cancel := context.WithTimeout(g.life, 10*time.Second)
		defer cancel()
		if err := u.client.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			g.o.Log.Warn("upstream resources/unsubscribe", "upstream", u.cfg.Name, "uri", uri, "error", err)
		}
	}
}

// unsubscribeAll drops an ended session's subscriptions.
func (g *Gateway) unsubscribeAll(ss *mcp.ServerSession) {
	g.mu.Lock()
	var uris []string
	for uri, subs := range g.subs {
		if subs[ss] {
			uris = append(uris, uri)
		}
	}
	g.mu.Unlock()
	for _, uri := range uris {
		g.drop(ss, uri)
	}
}

// updated tells the host sessions subscribed to a resource that the
// upstream offering it says it changed (the SDK sends to each subscriber).
func (g *Gateway) updated(ctx context.Context, u *upstream, p *mcp.ResourceUpdatedNotificationParams) {
	if g.owners.resource(p.URI) != u {
		return // an upstream speaks only for its own resources
	}
	if err := g.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: p.URI}); err != nil {
		g.o.Log.Warn("resource update not delivered", "uri", p.URI, "error", err)
	}
}

// complete forwards completion/complete to the upstream that offers the
// prompt or resource template it is about, under the upstream's own name.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if req.Params == nil || req.Params.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "pedigree: completion/complete without a ref"}
	}
	p := *req.Params
	ref := *p.Ref
	p.Ref, p.Meta = &ref, nil
	var u *upstream
	switch ref.Type {
	case "ref/prompt":
		if o, ok := g.owners.prompts[ref.Name]; ok {
			u, ref.Name = o.up, o.name
		}
	case "ref/resource":
		u = g.owners.resource(ref.URI)
	}
	if u == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("pedigree: no upstream offers %s %s%s", ref.Type, ref.Name, ref.URI)}
	}
	if caps := u.capabilities(); caps == nil || caps.Completions == nil {
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	s := g.session(req.Session)
	if err := g.start(ctx, s, req.Session); err != nil {
		return nil, withheld(err)
	}
	res, err := u.client.Complete(ctx, &p)
	if err != nil {
		return nil, g.admitFailure(ctx, u, s, err)
	}
	stripKeys(res.Meta)
	if _, err := g.admit(ctx, admission{up: u, s: s, kind: lineage.KindRetrieval, body: res}); err != nil {
		return nil, withheld(err)
	}
	return res, nil
}
