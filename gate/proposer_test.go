package gate_test

import (
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
)

// TestUntrustedProposerDenied: a call proposed by an external or unverified
// principal is denied, even when the user's prompt justifies it and the tool
// is not sensitive; the call entry's own tier is the proposer's.
func TestUntrustedProposerDenied(t *testing.T) {
	w := world(t)
	prompt := w.Record("user:alice", "s1", "pay my bill to 123-456", nil)
	for _, as := range []string{"tool:gmail_read", "tool:web_fetch"} {
		for _, tool := range []string{"send_money", "lookup"} {
			d := w.Check(as, pedigree.Call{Session: "s1", Tool: tool, Args: []byte(`{"recipient":"123-456","amount":5}`), Justification: []string{prompt.ID}})
			if d.Decision != gate.Deny || !strings.Contains(d.Reasons[0], "proposed by") || !strings.Contains(d.Reasons[0], as) {
				t.Fatalf("%s proposing %s: got %s %v, want deny naming the proposer", as, tool, d.Decision, d.Reasons)
			}
		}
	}
	for _, as := range []string{"agent:planner", "user:alice", "tool:calculator"} {
		d := w.Check(as, pedigree.Call{Session: "s1", Tool: "send_money", Args: []byte(`{"recipient":"123-456","amount":5}`), Justification: []string{prompt.ID}})
		if d.Decision != gate.Allow {
			t.Fatalf("%s proposing a user-justified call: got %s %v, want allow", as, d.Decision, d.Reasons)
		}
	}
}
