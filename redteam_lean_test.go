package pedigree_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/enginetest"
)

// A decision made by the default policy logs its lean input: the
// justification lists only its untrusted entries. An operator who then
// adds an extension and re-evaluates the log, to learn what the new policy
// would have decided, gets the extension evaluated on that trimmed input:
// a rule that reads the trusted entries (here: a payment must rest on a
// user's instruction) finds none and denies, though the same call checked
// under the extension, on its whole justification, is allowed. The
// re-evaluation's answer differs from the policy's on the untrimmed input.
func TestRedTeamReevaluateOfALeanInputUnderAnExtension(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.Record("user:alice", "s", "pay my bill to 123-456", nil)
	call := pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "send_money", Args: []byte(`{"to":"123-456"}`)}
	logged := w.Check("agent:planner", call)
	if logged.Decision != gate.Allow {
		t.Fatalf("the default policy on a user's instruction: %+v", logged)
	}

	ext := t.TempDir()
	rule := "package pedigree.ext\n\nimport rego.v1\n\n" +
		"deny contains \"a payment rests on no user's instruction\" if {\n" +
		"\tinput.action.tool == \"send_money\"\n" +
		"\tnot user_instructed\n}\n\n" +
		"user_instructed if {\n\tsome e in input.justification\n\te.tier == \"user\"\n}\n"
	if err := os.WriteFile(filepath.Join(ext, "ext.rego"), []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	w.E.Close()
	e, err := pedigree.Open(t.Context(), w.Dir, pedigree.WithClock(w.Clock.Now), pedigree.WithPolicyDir(ext))
	if err != nil {
		t.Fatal(err)
	}
	w.E = e
	fresh := w.Check("agent:planner", call)
	if fresh.Decision != gate.Allow {
		t.Fatalf("the extension on the whole justification: %+v", fresh)
	}
	r, err := e.Reevaluate(t.Context(), logged.ID)
	if err != nil {
		// Refusing to re-evaluate a trimmed input under a policy that
		// reads every entry is a correct answer too.
		t.Logf("re-evaluation refused: %v", err)
		return
	}
	if r.Decision != fresh.Decision {
		t.Fatalf("re-evaluated under the extension: %s %q; the extension on the whole justification: %s %q",
			r.Decision, r.Reasons, fresh.Decision, fresh.Reasons)
	}
}
