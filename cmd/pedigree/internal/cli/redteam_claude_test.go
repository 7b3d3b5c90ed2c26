package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
)

// TestRedTeamInstallBackupDoesNotFollowSymlinks: 'claude install
// --project' (and --mcp, for the repository's .mcp.json) writes
// FILE.pedigree-backup and FILE.pedigree-tmp beside a file in a repository
// the attacker wrote, with os.WriteFile, which follows a symlink planted
// there. The repository's own settings.json (attacker's bytes, a valid JSON
// object that is also a shell line: {"a":"$(cmd)"}) lands in any file of
// the user's, here ~/.bashrc.
func TestRedTeamInstallBackupDoesNotFollowSymlinks(t *testing.T) {
	tmp := t.TempDir()
	victim := filepath.Join(tmp, "home", ".bashrc")
	os.MkdirAll(filepath.Dir(victim), 0o755)
	os.WriteFile(victim, []byte("# the user's own bashrc\n"), 0o644)
	repo := filepath.Join(tmp, "repo", ".claude")
	os.MkdirAll(repo, 0o755)
	settings := filepath.Join(repo, "settings.json")
	evil := `{"x":"$(touch /tmp/pwned)"}` + "\n"
	os.WriteFile(settings, []byte(evil), 0o644)
	if err := os.Symlink(victim, settings+".pedigree-backup"); err != nil {
		t.Fatal(err)
	}
	_, _, err := mergeSettingsFile(settings, hook.CommandSettings("/usr/local/bin/pedigree hook claude"))
	got, _ := os.ReadFile(victim)
	if string(got) != "# the user's own bashrc\n" {
		t.Errorf("install wrote through the planted symlink %s (err %v): ~/.bashrc is now %q", settings+".pedigree-backup", err, got)
	}

	// The same through the temporary file.
	os.Remove(settings + ".pedigree-backup")
	os.WriteFile(victim, []byte("# the user's own bashrc\n"), 0o644)
	os.WriteFile(settings, []byte(evil), 0o644)
	if err := os.Symlink(victim, settings+".pedigree-tmp"); err != nil {
		t.Fatal(err)
	}
	_, _, err = mergeSettingsFile(settings, hook.CommandSettings("/usr/local/bin/pedigree hook claude"))
	got, _ = os.ReadFile(victim)
	if string(got) != "# the user's own bashrc\n" {
		t.Errorf("install wrote through the planted symlink %s (err %v): ~/.bashrc is now %.80q", settings+".pedigree-tmp", err, got)
	}
}

// TestRedTeamInstallClaimsProtectionWhenHooksDoNotRun: install says
// "Claude Code is protected from its next session on" over a settings.json
// in which Claude Code runs none of pedigree's hooks: one with a second
// "hooks" key (JSON.parse keeps the last; the merge fills the first, and
// calls the result unchanged: "already holds pedigree's hooks: not
// written"), and one with "disableAllHooks": true. Install must refuse, or
// say so, or leave hooks that run.
func TestRedTeamInstallClaimsProtectionWhenHooksDoNotRun(t *testing.T) {
	bin := pedigreeBinary(t)
	for name, doc := range map[string]string{
		"a second hooks key": `{"hooks": {}, "hooks": {}}`,
		"disableAllHooks":    `{"disableAllHooks": true}`,
	} {
		t.Run(name, func(t *testing.T) {
			c, _, settings, _ := claudeHome(t)
			os.WriteFile(settings, []byte(doc), 0o600)
			r := c.runNoDir("claude", "install", "--command", bin)
			if r.code != 0 || strings.Contains(r.out+r.err, "disableAllHooks") {
				return // refused, or said so
			}
			after, _ := os.ReadFile(settings)
			var eff struct {
				DisableAllHooks bool `json:"disableAllHooks"`
				Hooks           map[string][]struct {
					Hooks []struct{ Command string }
				}
			}
			json.Unmarshal(after, &eff) // the last of duplicate keys, as JSON.parse
			found := false
			for _, g := range eff.Hooks["PreToolUse"] {
				for _, h := range g.Hooks {
					found = found || hook.IsPedigreeCommand(h.Command)
				}
			}
			if eff.DisableAllHooks || !found {
				t.Errorf("install succeeded and said:\n%s\nbut Claude Code runs no pedigree hook with:\n%s", r.out, after)
			}
		})
	}
}
