//go:build browser

package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
)

// TestUIInBrowser drives the page in Debian's chromium (playwright-core from
// testdata/ui, installed by .ci/run): the poisoned session's stopped payment
// is on the pending list with its recipient; its graph marks the email as
// the untrusted root and the strong path to it; the root's page says its
// signature verifies; no script runs; the person approves once; the retried
// call is allowed once and a second retry is not. Screenshots of each view go
// to $PEDIGREE_SCREENSHOTS (docs/ui in the repository), else the test's
// temporary directory.
func TestUIInBrowser(t *testing.T) {
	script, _ := filepath.Abs("../../../../testdata/ui/e2e.mjs")
	if _, err := os.Stat("../../../../testdata/ui/node_modules/playwright-core"); err != nil {
		t.Fatalf("playwright-core is not installed: (cd testdata/ui && npm ci)")
	}
	u := newUIWorld(t, true)
	link, err := u.ui.LoginURL("")
	if err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv("PEDIGREE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	out, err := exec.Command("node", script, link, u.denied.ID, "999-666", shots).CombinedOutput()
	if err != nil {
		t.Fatalf("the browser run failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var seen struct {
		PendingShowsRecipient bool     `json:"pendingShowsRecipient"`
		UntrustedNodes        int      `json:"untrustedNodes"`
		TaintEdges            int      `json:"taintEdges"`
		RecipientRowUntrusted int      `json:"recipientRowUntrusted"`
		EntrySignature        bool     `json:"entrySignature"`
		Flash                 string   `json:"flash"`
		SessionPath           bool     `json:"sessionPath"`
		Dialogs               int      `json:"dialogs"`
		ConsoleErrors         []string `json:"consoleErrors"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &seen); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("seen: %+v; screenshots in %s", seen, shots)
	if !seen.PendingShowsRecipient || seen.UntrustedNodes == 0 || seen.TaintEdges == 0 || seen.RecipientRowUntrusted != 1 || !seen.EntrySignature {
		t.Errorf("the page did not show the action and its provenance: %+v", seen)
	}
	if len(seen.ConsoleErrors) != 0 {
		t.Errorf("the browser logged errors: %q", seen.ConsoleErrors)
	}
	if seen.Dialogs != 0 {
		t.Errorf("a script in stored content ran (%d dialogs)", seen.Dialogs)
	}
	if !seen.SessionPath {
		t.Errorf("the pages are not under the session's secret path")
	}
	if !strings.Contains(seen.Flash, "approved") {
		t.Errorf("no confirmation after approving: %q", seen.Flash)
	}
	retry := pedigree.Call{Session: "s1", Tool: "send_money", Args: []byte(`{"a_memo":"` + strings.Repeat("rent for december ", 30) + `","to":"999-666"}`),
		ArgSources: map[string][]string{"to": {u.email.ID}, "a_memo": {u.email.ID}}, Justification: []string{u.email.ID}}
	if d := u.w.Check("agent:planner", retry); d.Decision != gate.Allow {
		t.Fatalf("the call approved on the page, retried: %s %v", d.Decision, d.Reasons)
	}
	if d := u.w.Check("agent:planner", retry); d.Decision == gate.Allow {
		t.Fatal("the approval allowed its call twice")
	}
}
