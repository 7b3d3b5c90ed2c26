package hook

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedTeamMergeDuplicateKeys: JSON.parse (Claude Code) keeps the last
// of duplicate keys; MergeSettings writes pedigree's hooks into the first.
// A settings.json an attacker wrote (a repository's, for --project) with a
// second "hooks" (or a second "PreToolUse") gets install's "installed"
// while Claude Code runs none of pedigree's hooks. Install must refuse
// such a file, or leave pedigree's hooks in what Claude Code reads.
func TestRedTeamMergeDuplicateKeys(t *testing.T) {
	cmd := "/usr/local/bin/pedigree hook claude || exit 2"
	for name, in := range map[string]string{
		"two hooks":      `{"hooks": {}, "hooks": {}}`,
		"two PreToolUse": `{"hooks": {"PreToolUse": [], "PreToolUse": []}}`,
	} {
		out, _, err := MergeSettings([]byte(in), CommandSettings("/usr/local/bin/pedigree hook claude"))
		if err != nil {
			continue // refused: fine
		}
		// What Claude Code reads: the last of duplicate keys (as Go's map decoding).
		var eff struct {
			Hooks map[string][]struct {
				Hooks []struct{ Command string }
			}
		}
		if err := json.Unmarshal(out, &eff); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, g := range eff.Hooks["PreToolUse"] {
			for _, h := range g.Hooks {
				found = found || strings.Contains(h.Command, "hook claude")
			}
		}
		if !found {
			t.Errorf("%s: merged, but the PreToolUse Claude Code reads has no pedigree hook:\n%s\n(want %q)", name, out, cmd)
		}
	}
}

// TestRedTeamRemoveWhatInstallWrote: pedigree's hooks are recognised by
// the word "pedigree" somewhere in the command; install with
// --command /opt/bin/pg --dir /srv/guard writes hooks that carry neither,
// so a second install adds them again and uninstall leaves them (each ends
// in '|| exit 2': once the binary is gone, every tool call is blocked).
func TestRedTeamRemoveWhatInstallWrote(t *testing.T) {
	s := CommandSettings("'/opt/bin/pg' --dir '/srv/guard' hook claude")
	once, _, err := MergeSettings(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	twice, changed, err := MergeSettings(once, s)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Errorf("a second install changed the settings (its hooks were not recognised):\n%s", twice)
	}
	out, _, err := RemoveSettings(once)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hook claude") {
		t.Errorf("uninstall left pedigree's hooks:\n%s", out)
	}
}
