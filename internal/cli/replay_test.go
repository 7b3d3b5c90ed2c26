package cli

import (
	"path/filepath"
	"testing"
)

// The README's glob of the hand-written scenarios agrees in full: the
// refusals that refused.jsonl expects are agreement, not errors.
func TestReplayScenarioGlob(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "scenarios", "*.jsonl"))
	if err != nil || len(files) < 2 {
		t.Fatalf("glob: %v %v", files, err)
	}
	c := newEnv(t)
	r := c.run(append([]string{"-o", "json", "replay"}, files...)...)
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	if s := r.json(t); s["errors"] != float64(0) || s["refused"] != float64(3) || s["agreement"] != float64(1) {
		t.Fatalf("summary %v", s)
	}
}
