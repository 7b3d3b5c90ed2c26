package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safetext"
	"github.com/pedigree-ai/pedigree/lineage"
)

// inputID names the gateway's input request in a 2026-07-28 round trip.
const inputID = "io.pedigree/approval"

// newProtocol is the first protocol version without initialize, where a
// server asks through input requests instead of elicitation/create.
const newProtocol = "2026-07-28"

func approvalSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"approve": map[string]any{"type": "boolean", "title": "Run this call once",
				"description": "true runs exactly this call, once; anything else refuses it"},
		},
		"required": []string{"approve"},
	}
}

// askMessage is what the person is asked: the call's exact view (every
// protected argument whole and first, with where it came from;
// gate.Pending.View), then why it is held: the content it relied on, then
// the gate's rule names. Everything in it is escaped for
// a terminal, and it says so when something was.
func (g *Gateway) askMessage(ctx context.Context, t tool, canon []byte, d *gate.Decision) string {
	p, err := g.o.Backend.Subject(ctx, d.ID)
	if err != nil {
		// Without the logged evidence every argument is shown whole, as
		// protected: the person still sees the exact call.
		g.o.Log.Warn("the decision's evidence could not be read for the ask", "decision_id", d.ID, "error", err)
		p = &gate.Pending{DecisionID: d.ID, Decision: d.Decision, Tool: d.Tool, Args: canon}
	}
	lines, escaped := p.View()
	name, n := safetext.Escape(t.exposed.Name, safetext.Line)
	escaped += n
	var b strings.Builder
	fmt.Fprintf(&b, "pedigree asks: may the agent run %s with these arguments?\n", name)
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	// What it relied on in plain words first; the rule names after.
	var why strings.Builder
	for _, u := range d.Untrusted {
		fmt.Fprintf(&why, "It relies on content from %s (%s tier)%s. ", u.Principal, u.Tier, g.describe(u.Principal))
	}
	if len(d.Reasons) > 0 {
		fmt.Fprintf(&why, "Rules: %s. ", strings.Join(d.Reasons, "; "))
	}
	fmt.Fprintf(&why, "Decision %s.", short(d.ID))
	return b.String() + safetext.Message(why.String(), escaped)
}

// ask asks the human through the host. On protocols before 2026-07-28 it
// elicits inside the call; on 2026-07-28 it returns an input request with a
// signed request state, and the client calls again with the answer. Where
// the human cannot be asked, the call is refused: never forwarded unasked.
func (g *Gateway) ask(ctx context.Context, req *mcp.CallToolRequest, t tool, s *session, canon []byte, d *gate.Decision) (*mcp.CallToolResult, error) {
	if g.o.Approver == nil {
		return g.denied(ctx, t, d, "it needs a person's approval and this gateway has no approver (--approver)"), nil
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return g.denied(ctx, t, d, "it needs a person's approval and this client cannot ask one (it declares no elicitation)"), nil
	}
	params := &mcp.ElicitParams{Mode: "form", Message: g.askMessage(ctx, t, canon, d), RequestedSchema: approvalSchema()}
	if ip.ProtocolVersion >= newProtocol {
		state, err := g.sealState(requestState{Session: s.id, Tool: t.key, Action: lineage.ActionDigest(t.key, canon), Decision: d.ID})
		if err != nil {
			return g.denied(ctx, t, d, "it needs a person's approval and the request could not be prepared: "+err.Error()), nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputID: params}, RequestState: state}, nil
	}
	actx, cancel := context.WithTimeout(ctx, AskTimeout)
	defer cancel()
	res, err := req.Session.Elicit(actx, params)
	if err != nil {
		return g.denied(ctx, t, d, "it needs a person's approval and asking failed: "+err.Error()), nil
	}
	return g.answer(ctx, req, t, s, canon, d, res)
}

// answer acts on the human's answer: accept records a single-use approval
// signed by the approver, then the same call is checked again and, allowed
// once, forwarded once.
func (g *Gateway) answer(ctx context.Context, req *mcp.CallToolRequest, t tool, s *session, canon []byte, d *gate.Decision, res *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	if res == nil || res.Action != "accept" || res.Content["approve"] != true {
		action := "no answer"
		if res != nil {
			action = res.Action
		}
		return g.denied(ctx, t, d, fmt.Sprintf("it needs a person's approval and the person asked did not give it (%s)", action)), nil
	}
	if _, err := g.o.Backend.Approve(ctx, g.o.Approver, g.o.ApproverID, d.ID, ApprovalTTL); err != nil {
		return g.denied(ctx, t, d, "the approval could not be recorded: "+err.Error()), nil
	}
	d2, err := g.check(ctx, s, t, canon)
	if err != nil {
		return g.refused(t, d, "the gate could not decide after the approval: "+err.Error()), nil
	}
	if d2.Decision != gate.Allow {
		return g.denied(ctx, t, d2, "it was approved, and still refused"), nil
	}
	return g.forward(ctx, req, t, s, canon, d2, nil)
}

// requestState is what a 2026-07-28 input request carries to the retry:
// signed by the gateway (a key of this process), bound to the session, the
// tool and the digest of its exact arguments, single use and expiring.
type requestState struct {
	Session  string `json:"session"`
	Tool     string `json:"tool"`
	Action   string `json:"action"`
	Decision string `json:"decision"`
	Expires  int64  `json:"expires"`
	Nonce    string `json:"nonce"`
}

func (g *Gateway) sealState(st requestState) (string, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	st.Nonce = hex.EncodeToString(nonce)
	st.Expires = g.o.Now().Add(RequestStateTTL).Unix()
	payload, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, g.stateKey)
	mac.Write(payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(mac.Sum(nil)), nil
}

var errState = errors.New("request state refused")

// openState checks a request state: this gateway's signature, not expired,
// not used before, and bound to this session, tool and arguments.
func (g *Gateway) openState(token, session, tool string, canon []byte) (*requestState, error) {
	p, m, ok := strings.Cut(token, ".")
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	sig, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: malformed", errState)
	}
	mac := hmac.New(sha256.New, g.stateKey)
	mac.Write(payload)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, fmt.Errorf("%w: not signed by this gateway", errState)
	}
	var st requestState
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("%w: %v", errState, err)
	}
	now := g.o.Now()
	if now.Unix() > st.Expires {
		return nil, fmt.Errorf("%w: expired", errState)
	}
	if st.Session != session || st.Tool != tool || st.Action != lineage.ActionDigest(tool, canon) {
		return nil, fmt.Errorf("%w: it was issued for another call", errState)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for n, exp := range g.used {
		if now.After(exp) {
			delete(g.used, n)
		}
	}
	if _, dup := g.used[st.Nonce]; dup {
		return nil, fmt.Errorf("%w: already used", errState)
	}
	g.used[st.Nonce] = time.Unix(st.Expires, 0)
	return &st, nil
}

// resume is the retry of a 2026-07-28 call that carried an input request.
func (g *Gateway) resume(ctx context.Context, req *mcp.CallToolRequest, t tool, s *session, canon []byte) (*mcp.CallToolResult, error) {
	st, err := g.openState(req.Params.RequestState, s.id, t.key, canon)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "pedigree: " + err.Error()}
	}
	d := &gate.Decision{ID: st.Decision, Decision: gate.Ask, Tool: t.key, Session: s.id, Reasons: []string{"a person's approval was asked for"}}
	res, _ := req.Params.InputResponses[inputID].(*mcp.ElicitResult)
	return g.answer(ctx, req, t, s, canon, d, res)
}
