package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/rollup"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safetext"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

func (g *Gateway) handler(t tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.call(ctx, req, t)
	}
}

// call is one tools/call: check, then forward, ask or refuse.
func (g *Gateway) call(ctx context.Context, req *mcp.CallToolRequest, t tool) (*mcp.CallToolResult, error) {
	args := bytes.TrimSpace(req.Params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	canon, err := lineage.CanonicalArgs(args)
	if err != nil {
		// Bad input: a protocol error, and nothing is recorded.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("pedigree: the arguments of %s are refused: %v", t.exposed.Name, err)}
	}
	s := g.callSession(req.Session, t, canon)
	if err := g.settled(s); err != nil {
		return g.refused(t, nil, err.Error()), nil
	}
	if err := g.start(ctx, s, req.Session); err != nil {
		return g.refused(t, nil, "the session's start could not be recorded: "+err.Error()), nil
	}
	if req.Params.RequestState != "" {
		return g.resume(ctx, req, t, s, canon)
	}
	d, stored, err := g.checkEarly(ctx, s, t, canon)
	if err != nil {
		return g.refused(t, nil, "the gate could not decide: "+err.Error()), nil
	}
	switch {
	case d.Decision == gate.Allow:
		return g.forward(ctx, req, t, s, canon, d, stored)
	case g.o.Mode == Shadow:
		g.o.Log.Warn("shadow: forwarded a call enforce would have refused", "mode", "shadow", "decision", d.Decision,
			"decision_id", d.ID, "tool", t.key, "session", s.id, "reasons", d.Reasons)
		return g.forward(ctx, req, t, s, canon, d, nil)
	case d.Decision == gate.Ask:
		return g.ask(ctx, req, t, s, canon, d)
	}
	return g.denied(ctx, t, d, ""), nil
}

// check records the call, justified by the session's context, and decides.
func (g *Gateway) check(ctx context.Context, s *session, t tool, canon []byte) (*gate.Decision, error) {
	c, err := g.callOf(ctx, s, t, canon)
	if err != nil {
		return nil, err
	}
	return g.o.Backend.Check(ctx, g.o.Agent, c)
}

// callOf is the call, justified by the session's context: by the engine's
// default (the whole context) while it is short, else by the session's
// rollups and the context's tail (internal/rollup), since a call that lists
// its parents names at most lineage.MaxParents and a long session's context
// holds more. A backend that names a context by reference (the engine
// itself, a pedigree.ContextReferrer) always takes the default: its call
// lists nothing, whatever the context's length, and nothing is rolled up.
func (g *Gateway) callOf(ctx context.Context, s *session, t tool, canon []byte) (pedigree.Call, error) {
	c := pedigree.Call{Principal: AgentPrincipal, Session: s.id, Tool: t.key, Args: canon}
	if _, byRef := g.o.Backend.(pedigree.ContextReferrer); byRef {
		return c, nil
	}
	just, rolled, err := rollup.Justification(ctx, g.o.Backend, &g.rollups, AgentPrincipal,
		func() (*registry.Signer, error) { return g.o.Agent, nil }, s.id)
	if err != nil {
		return c, fmt.Errorf("the session's context could not be read: %w", err)
	}
	if rolled {
		c.Justification = just
	}
	return c, nil
}

// checkEarly is check, except that on a local engine an allow of a tool
// that is not sensitive comes back before it is stored, so that its commit
// runs while the upstream works (pedigree.Engine.CheckEarly). stored, when
// not nil, waits for that commit: forward calls it before the result goes
// back, and the session's next request waits for it too (pending), so the
// next decision is made on a trajectory that holds this call.
func (g *Gateway) checkEarly(ctx context.Context, s *session, t tool, canon []byte) (*gate.Decision, func() error, error) {
	ce, ok := g.o.Backend.(earlyChecker)
	if !ok {
		d, err := g.check(ctx, s, t, canon)
		return d, nil, err
	}
	c, err := g.callOf(ctx, s, t, canon)
	if err != nil {
		return nil, nil, err
	}
	d, stored, err := ce.CheckEarly(ctx, g.o.Agent, c)
	if err != nil || stored == nil {
		return d, nil, err
	}
	s.outMu.Lock()
	s.pending++
	s.outMu.Unlock()
	g.outputs.Go(func() {
		stored()
		s.outMu.Lock()
		defer s.outMu.Unlock()
		s.pending--
		s.settle.Broadcast()
	})
	return d, stored, nil
}

// start records the entry that stands for the host's side of the session,
// once, before the session's first call, and what the upstreams offer that
// the operator's seal does not vouch for (admitUnvouched).
func (g *Gateway) start(ctx context.Context, s *session, ss *mcp.ServerSession) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	info := map[string]any{"mcp_session": s.id, "note": "an MCP session through the pedigree gateway; the host's prompt is not visible to it"}
	if ip := ss.InitializeParams(); ip != nil {
		s.protocol = ip.ProtocolVersion
		info["protocol"] = ip.ProtocolVersion
		if ip.ClientInfo != nil {
			info["client"] = ip.ClientInfo.Name + " " + ip.ClientInfo.Version
		}
	}
	content, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err = g.o.Backend.Record(ctx, g.o.Agent, pedigree.Entry{Principal: AgentPrincipal, Kind: lineage.KindPrompt,
		Session: s.id, Content: content, Parents: []lineage.Parent{}, StoreContent: true}); err != nil {
		return err
	}
	if err := g.admitUnvouched(ctx, s); err != nil {
		return fmt.Errorf("what the upstreams offer, not as the operator sealed it, could not be recorded: %w", err)
	}
	s.started = true
	return nil
}

// forward sends an allowed call to its upstream and records the result as
// the tool's output, derived from the call (and, for a memory read, from
// the memory entries it returns). A result whose output entry cannot be
// signed is withheld: content the engine does not know about would carry no
// taint. The entry is committed while the result goes back (admit);
// one that then fails to commit refuses the rest of the session. stored,
// when not nil, is the commit of the call and its decision, still running
// (checkEarly): no result goes back before it is done, and a result whose
// call could not be stored is withheld.
func (g *Gateway) forward(ctx context.Context, req *mcp.CallToolRequest, t tool, s *session, canon []byte, d *gate.Decision, stored func() error) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: t.name, Arguments: json.RawMessage(canon)}
	// (The route stays until the result is returned: the SDK may hand the
	// gateway the upstream's last progress after its result.)
	defer g.withProgress(ctx, req, params, s, t.up, d.CallID)()
	res, err := t.up.client.CallTool(ctx, params)
	if stored != nil {
		if err := stored(); err != nil {
			g.o.Log.Error("a call forwarded before its decision was stored could not be recorded: its result is withheld",
				"tool", t.key, "session", s.id, "decision_id", d.ID, "error", err)
			return g.failed(t, nil, "the call could not be recorded, so its result is withheld: "+err.Error()), nil
		}
	}
	if err != nil && ctx.Err() != nil {
		// The host cancelled: the SDK told the upstream. The call entry and
		// its decision stay (it was sent); there is no output to record. (A
		// memory write the upstream made anyway is unknown content to the
		// gateway: read back, it counts as unverified.)
		g.o.Log.Info("call cancelled by the host after it was forwarded", "tool", t.key, "session", s.id, "decision_id", d.ID)
		return nil, ctx.Err()
	}
	if err != nil {
		// What the upstream said is content, recorded as the call's output.
		res := g.failed(t, d, fmt.Sprintf("the upstream %s failed: %v", t.up.cfg.Name, err))
		carried := &mcp.CallToolResult{IsError: true, Content: res.Content}
		if _, aerr := g.admit(context.WithoutCancel(ctx), admission{up: t.up, s: s, kind: lineage.KindToolOutput, body: carried,
			parents: []lineage.Parent{{ID: d.CallID, Weight: 1}}, later: true}); aerr != nil && g.o.Mode != Shadow {
			return g.failed(t, d, "the upstream failed, and what it said could not be recorded, so it is withheld: "+aerr.Error()), nil
		}
		return res, nil
	}
	// The upstream has acted: what it did is recorded whole even if the
	// host cancels now.
	ctx = context.WithoutCancel(ctx)
	stripMeta(res)
	parents := []lineage.Parent{{ID: d.CallID, Weight: 1}}
	if t.up.cfg.Memory && !res.IsError {
		switch {
		case memoryWrites[t.name]:
			if err := g.recordWrites(ctx, s, t.name, canon); err != nil {
				return g.failed(t, d, "the memory written could not be recorded: "+err.Error()), nil
			}
		case memoryReads[t.name]:
			mem, err := g.attributeRead(ctx, res)
			if err != nil {
				return g.failed(t, d, "the memory read could not be attributed: "+err.Error()), nil
			}
			parents = append(parents, mem...)
		}
	}
	var as *registry.Signer
	principal := ""
	if confirms(t.name, canon, res) {
		// Nothing in it but the call's arguments (confirm.go); what was
		// written is the agent's memory, found again when it is read.
		as, principal = g.o.Agent, AgentPrincipal
		if text, ok := writtenText(t.name, canon); ok {
			if _, err := g.o.Backend.Record(ctx, g.o.Agent, pedigree.Entry{Principal: AgentPrincipal, Kind: lineage.KindMemory,
				Session: s.id, Content: []byte(text), StoreContent: len(text) <= maxStoredWrite, Parents: []lineage.Parent{{ID: d.CallID, Weight: 1}}}); err != nil {
				return g.failed(t, d, "the file written could not be recorded: "+err.Error()), nil
			}
		}
	} else if text, ok := fileText(t.name, canon, res); ok {
		// A file the agent wrote itself, read back whole: its output
		// derives from what wrote it, by digest, as memory does.
		ids, err := g.o.Backend.ByContent(ctx, lineage.DigestContent([]byte(text)))
		if err != nil {
			return g.failed(t, d, "the file read could not be attributed: "+err.Error()), nil
		}
		if len(ids) > 0 && len(ids) < lineage.MaxParents/2 {
			as, principal = g.o.Agent, AgentPrincipal
			for _, id := range ids {
				parents = append(parents, lineage.Parent{ID: id, Weight: 1})
			}
		}
	}
	outputID, err := g.admit(ctx, admission{up: t.up, s: s, kind: lineage.KindToolOutput, body: res, parents: parents, later: true,
		signer: as, principal: principal})
	switch {
	case err == nil:
	case g.o.Mode == Shadow && !errors.Is(err, errTooLarge):
		g.o.Log.Error("shadow: forwarded a result that could not be recorded", "mode", "shadow", "tool", t.key, "error", err)
	default:
		return g.failed(t, d, "the result could not be recorded, so it is withheld: "+err.Error()), nil
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	m := g.decisionMeta(d)
	m["output_id"] = outputID
	res.Meta[MetaDecision] = m
	return res, nil
}

// stripMeta removes every io.pedigree/ key an upstream put in its result:
// only the gateway speaks for pedigree, and an upstream must not be able to
// forge a decision the host would read as ours. The protocol's reserved
// io.modelcontextprotocol/ keys go too: they describe the upstream's own
// session (its server info, its protocol), not the gateway's, and the SDK
// writes the gateway's where the protocol wants them. Other keys pass.
func stripMeta(res *mcp.CallToolResult) { stripKeys(res.Meta) }

func stripKeys(m mcp.Meta) {
	for k := range m {
		if strings.HasPrefix(k, metaPrefix) || strings.HasPrefix(k, reservedPrefix) {
			delete(m, k)
		}
	}
}

func (g *Gateway) decisionMeta(d *gate.Decision) map[string]any {
	m := map[string]any{"decision": gate.Deny, "decision_id": "", "untrusted": []lineage.Source{}, "mode": string(g.o.Mode)}
	if d != nil {
		m["decision"], m["decision_id"], m["call_id"], m["session"] = d.Decision, d.ID, d.CallID, d.Session
		if d.Untrusted != nil {
			m["untrusted"] = d.Untrusted
		}
	}
	return m
}

// denied is the result of a call the gate refused. It says first, in
// plain words, what was stopped and why, then the call exactly as a person
// would be asked about it (every protected argument whole, each argument
// with the source its value came from; gate.Pending.View), then the
// untrusted content it relied on; the gate's rule names come last, after
// "Rules:" (they stay whole in -o json and gate log).
func (g *Gateway) denied(ctx context.Context, t tool, d *gate.Decision, why string) *mcp.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "pedigree denied %s, and nothing was forwarded", t.exposed.Name)
	if why != "" {
		b.WriteString(": " + why)
	}
	b.WriteString(".")
	escaped := 0
	if g.o.Backend != nil && d.ID != "" {
		if p, err := g.o.Backend.Subject(ctx, d.ID); err == nil {
			lines, n := p.View()
			escaped += n
			// One line: the host shows it as the tool's error text.
			fmt.Fprintf(&b, " The call, with where each argument's value came from: %s.", strings.Join(lines, "; "))
		} else {
			g.o.Log.Warn("the decision's evidence could not be read for the deny", "decision_id", d.ID, "error", err)
		}
	}
	for _, u := range d.Untrusted {
		path := make([]string, len(u.Path))
		for i, p := range u.Path {
			path[i] = short(p)
		}
		fmt.Fprintf(&b, " It relied on content from %s (%s tier)%s, entry %s, reached through %s.",
			u.Principal, u.Tier, g.describe(u.Principal), short(u.ID), strings.Join(path, " <- "))
	}
	if len(d.Reasons) > 0 {
		fmt.Fprintf(&b, " Rules: %s.", strings.Join(d.Reasons, "; "))
	}
	fmt.Fprintf(&b, " Decision %s (trace it: pedigree lineage trace %s).", d.ID, short(d.CallID))
	if g.o.ApproveHint != "" {
		fmt.Fprintf(&b, " A person can approve it once with: %s, then call it again.", strings.ReplaceAll(g.o.ApproveHint, "DECISION_ID", short(d.ID)))
	}
	if g.o.PageHint != "" {
		fmt.Fprintf(&b, " Or see it drawn, and decide, on a page: %s.", strings.ReplaceAll(g.o.PageHint, "DECISION_ID", short(d.ID)))
	}
	m := g.decisionMeta(d)
	m["decision"] = gate.Deny
	m["gate_decision"] = d.Decision
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: safetext.Message(b.String(), escaped)}}, Meta: mcp.Meta{MetaDecision: m}}
}

// describe names where a principal's content comes from, when the gateway
// knows it.
func (g *Gateway) describe(principal string) string {
	if principal == UnverifiedPrincipal {
		return ": memory content of unknown provenance"
	}
	for _, u := range g.upstreams {
		if u.cfg.Principal == principal {
			return fmt.Sprintf(": what the upstream MCP server %s returned", u.cfg.Name)
		}
	}
	return ""
}

// refused is a call the gateway could not decide on: a deny.
func (g *Gateway) refused(t tool, d *gate.Decision, why string) *mcp.CallToolResult {
	text := fmt.Sprintf("pedigree denied %s: %s; nothing was forwarded.", t.exposed.Name, why)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: safetext.Message(text, 0)}}, Meta: mcp.Meta{MetaDecision: g.decisionMeta(d)}}
}

// failed is an allowed call whose forwarding or recording failed.
func (g *Gateway) failed(t tool, d *gate.Decision, why string) *mcp.CallToolResult {
	text := safetext.Message(fmt.Sprintf("pedigree: %s: %s.", t.exposed.Name, why), 0)
	m := g.decisionMeta(d)
	m["error"] = why
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, Meta: mcp.Meta{MetaDecision: m}}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
