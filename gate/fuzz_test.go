package gate_test

import (
	"context"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// FuzzDecide feeds arbitrary call arguments and argument provenance to the
// policy-input builder and the policy: whatever the bytes, the answer is
// an error before the gate (bad arguments) or one of allow, deny and ask,
// never a panic, and an untrusted justification never allows a sensitive
// call.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{`{}`, `{"recipient":"1","amount":5}`, `{"a":{"b":[1,2,{"c":null}]}}`, `{"subject":"\u0000"}`, `[]`, `{"n":1e999}`} {
		f.Add(s, "recipient", true)
	}
	w := enginetest.New(f, enginetest.Default)
	ctx := context.Background()
	email := w.Record("tool:gmail_read", "s", "mail", nil)
	prompt := w.Record("user:alice", "s", "prompt", nil)
	f.Fuzz(func(t *testing.T, args, argName string, fromEmail bool) {
		src := prompt.ID
		if fromEmail {
			src = email.ID
		}
		c := pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "send_money", Args: []byte(args),
			Justification: []string{email.ID, prompt.ID}, ArgSources: map[string][]string{argName: {src}}}
		if _, _, err := w.E.Envelopes().CallStatement(ctx, c); err != nil {
			return
		}
		d, err := w.E.Preview(ctx, c)
		if err != nil {
			t.Fatalf("decide: %v", err)
		}
		switch d.Decision {
		case gate.Deny, gate.Ask:
		default:
			t.Fatalf("an email in the justification of an unknown (so sensitive) tool was %s: %v", d.Decision, d.Reasons)
		}
	})
}
