package gateway

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
)

// The ask shows the person the action (issue 26, item 6): canonical JSON
// sorts a_memo before to, and a 470-byte harmless memo once pushed the
// recipient out of a message clipped at 500 bytes, so the person accepted a
// payment to 999-666 without seeing it. Every protected argument is shown
// whole and first, with its source; the memo is shortened on a character
// boundary, saying how much was left out; a bidi override in it is shown
// escaped, and the message says so.
func TestAskShowsEveryProtectedArgumentWhole(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	catalog := strings.Replace(catalogAsk, "forger.echo: {sensitive: false}",
		"forger.echo: {sensitive: true, ask_on_untrusted: true, args: {a_memo: {trusted: false}}}", 1)
	w := newWorld(t, catalog, Upstream{Name: "forger", Principal: "tool:forger", Command: self, Args: []string{"-test.run=^$"},
		Env: []string{"PEDIGREE_GATEWAY_TEST_UPSTREAM=forger"}})

	var mu sync.Mutex
	var asked []string
	opts := mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "view-test", Version: "1"}, &opts).Connect(context.Background(), w.transport(t),
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	c := &client{t: t, cs: cs}
	messages := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
	w.readPoison(c)

	memo := strings.Repeat("€", 150) + "\u202e" + strings.Repeat("x", 17) // 470 bytes
	if len(memo) != 470 {
		t.Fatalf("memo is %d bytes", len(memo))
	}
	res := c.call("echo", map[string]any{"a_memo": memo, "amount": 5000, "to": "999-666"})
	if !res.IsError || len(messages()) != 1 {
		t.Fatalf("declined ask: isError=%v asked %d times: %q", res.IsError, len(messages()), text(res))
	}
	msg := messages()[0]
	to := strings.Index(msg, `to = "999-666"  [protected, shown whole; from the whole justification`)
	amount := strings.Index(msg, "amount = 5000  [protected, shown whole;")
	memoAt := strings.Index(msg, `a_memo = "€€`)
	if to < 0 || amount < 0 || memoAt < 0 || memoAt < to || memoAt < amount {
		t.Fatalf("the ask does not show every protected argument whole, before the data:\n%s", msg)
	}
	if !strings.Contains(msg, "tool:fs (external)") {
		t.Fatalf("the ask does not say where the recipient came from:\n%s", msg)
	}
	if !utf8.ValidString(msg) || !strings.Contains(msg, "bytes shown") || !strings.Contains(msg, "left out") {
		t.Fatalf("the memo is not shortened on a character boundary, saying so:\n%q", msg)
	}
	if strings.Contains(msg, "\u202e") {
		t.Fatalf("a bidi override reached the ask raw:\n%q", msg)
	}
	// The memo is cut before its override; a memo with it in view shows it
	// escaped, and the message says so (the ESC, JSON escapes itself).
	res = c.call("echo", map[string]any{"a_memo": "\u202egnp.exe\x1b[2K", "amount": 5000, "to": "999-666"})
	if !res.IsError || len(messages()) != 2 {
		t.Fatalf("second ask: isError=%v asked %d times", res.IsError, len(messages()))
	}
	if msg := messages()[1]; strings.ContainsAny(msg, "\u202e\x1b") || !strings.Contains(msg, `\u202egnp.exe\u001b[2K`) ||
		!strings.Contains(msg, "(1 control character shown escaped)") {
		t.Fatalf("controls in the ask:\n%q", msg)
	}
}

// The texts the gateway hands the host for a person to read (a deny, a
// refusal, a failure that quotes an upstream's error) show control
// characters escaped and say so.
func TestGatewayTextsEscapeControls(t *testing.T) {
	g := &Gateway{}
	bad := "x\x1b[2A\x1b[2Ky\u202e\u200b\u0085"
	tl := tool{up: &upstream{cfg: Upstream{Name: "evil"}}, name: "weather", key: "evil.weather", exposed: &mcp.Tool{Name: "evil__weather" + bad}}
	d := &gate.Decision{ID: strings.Repeat("a", 64), CallID: strings.Repeat("b", 64), Decision: gate.Deny, Reasons: []string{"reason " + bad},
		Untrusted: []lineage.Source{}}
	for name, res := range map[string]*mcp.CallToolResult{
		"denied":  g.denied(t.Context(), tl, d, "why "+bad),
		"refused": g.refused(tl, d, "why "+bad),
		"failed":  g.failed(tl, d, "the upstream evil failed: "+bad),
	} {
		s := text(res)
		if strings.ContainsAny(s, "\x1b\u202e\u200b\u0085") || !strings.Contains(s, `x\x1b[2A\x1b[2Ky\u202e\u200b\u0085`) || !strings.Contains(s, "control characters shown escaped)") {
			t.Errorf("%s: %q", name, s)
		}
	}
}
