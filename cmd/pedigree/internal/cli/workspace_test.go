package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
)

// trust-workspace --list shows the declarations as the hook counts them:
// a mapping changed behind the operator's seal, or a manifest that is not
// the one its declaration pins, is an error that says so, never a list.
func TestTrustWorkspaceListVerifies(t *testing.T) {
	c := newEnv(t)
	c.hookSetup()
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("# r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "i"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	root, _ := filepath.EvalSymlinks(repo)
	c.must("hook", "claude", "trust-workspace", repo)
	if r := c.must("hook", "claude", "trust-workspace", "--list"); !strings.Contains(r.out, root) {
		t.Fatalf("--list does not show %s:\n%s", root, r.out)
	}
	m, err := hook.LoadMapping(c.dir)
	if err != nil || len(m.Workspaces) != 1 {
		t.Fatalf("%v %+v", err, m)
	}
	mapping := filepath.Join(c.dir, hook.MappingFile)
	sealed, _ := os.ReadFile(mapping)

	// The declaration raised behind the seal, from internal to user (the
	// workspace's keys are sorted: its tier is the file's last line).
	i := strings.LastIndex(string(sealed), "tier: internal")
	if i < 0 || !strings.Contains(string(sealed[:i]), "workspaces:") {
		t.Fatalf("the mapping has no workspace tier to change:\n%s", sealed)
	}
	tampered := string(sealed[:i]) + "tier: user" + string(sealed[i+len("tier: internal"):])
	os.WriteFile(mapping, []byte(tampered), 0o644)
	r := c.run("hook", "claude", "trust-workspace", "--list")
	if r.code == 0 || !strings.Contains(r.err, "seal") || strings.Contains(r.out, root) {
		t.Fatalf("--list of a mapping off its seal: exit %d\n%s%s", r.code, r.out, r.err)
	}
	t.Logf("mapping off its seal: exit %d: %s", r.code, strings.TrimSpace(r.err))

	// The manifest the declaration pins, rewritten to vouch for a file
	// the commit does not hold.
	os.WriteFile(mapping, sealed, 0o644)
	manifest := filepath.Join(c.dir, m.Workspaces[0].Manifest)
	b, _ := os.ReadFile(manifest)
	os.WriteFile(manifest, []byte(strings.Replace(string(b), `"files":{`, `"files":{"evil.md":"00",`, 1)), 0o600)
	r = c.run("hook", "claude", "trust-workspace", "--list")
	if r.code == 0 || !strings.Contains(r.err, "does not verify") || !strings.Contains(r.err, root) {
		t.Fatalf("--list of a manifest off its pin: exit %d\n%s%s", r.code, r.out, r.err)
	}
	t.Logf("manifest off its pin: exit %d: %s", r.code, strings.TrimSpace(r.err))
}
