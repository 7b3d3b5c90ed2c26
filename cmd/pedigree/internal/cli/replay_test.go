package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// The glob of the hand-written scenarios agrees in full, with the shipped
// catalogs (plans.jsonl and delegated.jsonl are written against them): the refusals that
// refused.jsonl expects are agreement, not errors.
func TestReplayScenarioGlob(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "..", "testdata", "scenarios", "*.jsonl"))
	if err != nil || len(files) < 2 {
		t.Fatalf("glob: %v %v", files, err)
	}
	c := newEnv(t)
	cats := []string{}
	for _, f := range []string{"email", "payments", "files", "shell", "chat"} {
		cats = append(cats, filepath.Join("..", "..", "..", "..", "policies", "catalogs", f+".yaml"))
	}
	r := c.run(append([]string{"-o", "json", "replay", "--tools", strings.Join(cats, ",")}, files...)...)
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	if s := r.json(t); s["errors"] != float64(0) || s["refused"] != float64(3) || s["agreement"] != float64(1) {
		t.Fatalf("summary %v", s)
	}
}
