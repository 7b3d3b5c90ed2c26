package pedigree_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
	"github.com/pedigree-ai/pedigree/testkit/tampertest"
)

func problems(t *testing.T, w *enginetest.World) string {
	t.Helper()
	r, err := w.E.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, p := range r.Problems {
		all = append(all, p.What)
	}
	return strings.Join(all, "\n")
}

// TestWitnessNamesACutTail: the engine hands its checkpoints to a file
// witness outside the directory without anyone asking. An attacker without
// keys cuts the log's last decision (every other row rebuilt to match, the
// engine's signatures kept): a store without a witness verifies, one with
// its witness is named by verify and refuses to log anything more.
func TestWitnessNamesACutTail(t *testing.T) {
	for _, witnessed := range []bool{false, true} {
		t.Run(map[bool]string{false: "no witness", true: "witness"}[witnessed], func(t *testing.T) {
			var opts []pedigree.Option
			file := filepath.Join(t.TempDir(), "witness.json")
			if witnessed {
				opts = append(opts, pedigree.WithWitnessFile(file))
			}
			w := enginetest.NewOnDisk(t, enginetest.Default, opts...)
			w.SkipVerify = true
			_, mem := deniedSession(t, w)
			last := sendAgain(w, "agent:planner", mem.ID)
			w.E.Close() // the tail is witnessed at close
			w.E = nil
			if _, err := tampertest.Rebuild(t.Context(), w.Dir, tampertest.Edit{Drop: map[string]bool{last.ID: true}}); err != nil {
				t.Fatal(err)
			}
			if err := w.Reopen(); err != nil {
				t.Fatal(err)
			}
			got := problems(t, w)
			if !witnessed {
				if got != "" {
					t.Fatalf("without a witness the cut is invisible, but verify said: %s", got)
				}
				return
			}
			if !strings.Contains(got, "behind the checkpoint kept elsewhere") {
				t.Fatalf("verify against the witness: %q", got)
			}
			if _, err := w.TryRecord("user:alice", "s", "more", nil); !errors.Is(err, pedigree.ErrWitness) {
				t.Fatalf("a write after the cut: %v", err)
			}
		})
	}
}

// TestWitnessKeepsASpentApprovalSpent: a decision that spends an approval
// is witnessed at once, so cutting it from the log's tail (which brings
// the approval back as unused in the log) buys no second allow.
func TestWitnessKeepsASpentApprovalSpent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "witness.json")
	w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithWitnessFile(file), pedigree.WithCheckpointEvery(1000, time.Hour))
	w.SkipVerify = true
	d, mem := deniedSession(t, w)
	if _, err := w.E.Approve(t.Context(), w.Keys["user:alice"], "user:alice", d.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	use := sendAgain(w, "agent:planner", mem.ID)
	if use.Decision != gate.Allow {
		t.Fatalf("the approved call: %s", use.Decision)
	}
	// Kill the engine without its closing checkpoint: only the one taken
	// for the approval's use protects it.
	w.Crash()
	if _, err := tampertest.Rebuild(t.Context(), w.Dir, tampertest.Edit{Drop: map[string]bool{use.ID: true}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if again, err := w.TryCheck("agent:planner", pedigree.Call{Session: "s", Tool: "send_money", Args: []byte(`{"to":"999"}`), Justification: []string{mem.ID}}); err == nil && again.Decision == gate.Allow {
		t.Fatalf("the approval allowed a second call after its use was cut from the tail")
	}
}
