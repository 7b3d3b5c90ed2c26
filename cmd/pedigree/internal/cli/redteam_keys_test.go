package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRedTeamTrustWorkspaceOperatorKeyFromEnv: docs/keys.md says the verbs
// that need the operator key read its reference from $PEDIGREE_OPERATOR_KEY
// (the way to use an operator key held by a KMS without a flag), and names
// trust-workspace among the operator's verbs. trust-workspace alone ignored
// the variable and looked only in the keys directory, where a KMS-held (or
// removed, as docs/threat-model.md asks after freeze) operator key is not:
// the operator could not trust a workspace the documented way. It now
// loads the operator key as freeze and seal do (and, as they do, refuses a
// key that is not Ed25519).
func TestRedTeamTrustWorkspaceOperatorKeyFromEnv(t *testing.T) {
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
	// The operator key moved off the keys directory, after freeze.
	moved := filepath.Join(t.TempDir(), "operator.key")
	if err := os.Rename(c.operatorKey(), moved); err != nil {
		t.Fatal(err)
	}
	c.env = map[string]string{"PEDIGREE_OPERATOR_KEY": moved}
	if r := c.run("hook", "claude", "trust-workspace", repo); r.code != ExitOK {
		t.Fatalf("trust-workspace with $PEDIGREE_OPERATOR_KEY: exit %d %s", r.code, r.err)
	}
}
