package tampertest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// A writer of the directory who edits a session's trajectory so that an
// operator policy acting on its features or alerts sees a harmless session:
// rows that no longer agree with the session's calls are refused at use (the
// check fails closed), and rows rewritten to agree are caught by verify,
// which re-derives every trajectory from the logged decisions and recalls.
func TestTrajectoryRowsAreRederived(t *testing.T) {
	w, opt := build(t)
	w.E.Close()
	w.E = nil
	features := []byte("dec/t/s2")
	orig := map[string][]byte{}
	for _, r := range rows(t, w.Dir) {
		orig[string(r.key)] = r.val
	}
	if orig[string(features)] == nil {
		t.Fatal("the workload left no trajectory for session s2")
	}
	var alerts int
	for k := range orig {
		if strings.HasPrefix(k, "dec/ta/s2\x00") {
			alerts++
		}
	}
	if alerts == 0 {
		t.Fatal("the workload raised no trajectory alert in session s2")
	}
	// harmless is s2's features with its recall and its unknown-recipient
	// sends forgotten, lengths and counts kept, so they agree with its calls.
	harmless := func() []byte {
		var s trajectory.State
		if err := json.Unmarshal(orig[string(features)], &s); err != nil {
			t.Fatal(err)
		}
		s.RecallBeforeSnd, s.SendNoRecall, s.UnknownSends, s.LongestRecall = false, true, 0, 0
		b, _ := json.Marshal(&s)
		return b
	}()

	cases := []struct {
		name   string
		edit   func(tx *store.Txn) error
		atUse  bool   // the next check in s2 fails closed
		report string // what verify says
	}{
		{"features deleted", func(tx *store.Txn) error { return tx.Delete(features) },
			true, `the trajectory features of session "s2", re-derived from the logged decisions and recalls, is missing`},
		{"features rewritten to agree with the calls", func(tx *store.Txn) error { return tx.Set(features, harmless) },
			false, `the trajectory features of session "s2" differs from the one re-derived`},
		{"every alert deleted", func(tx *store.Txn) error {
			return tx.Iterate([]byte("dec/ta/s2\x00"), false, func(k, _ []byte) error { return tx.Delete(k) })
		}, false, `in the trajectory of session "s2", re-derived from the logged decisions and recalls, is missing`},
		{"an alert added", func(tx *store.Txn) error {
			k := append([]byte("dec/ta/s2\x00"), 0, 0, 0, 0, 0, 0, 0, 7)
			return tx.Set(k, []byte(`{"rule":"model","message":"","at":0}`))
		}, false, `alert 7 of call 0 in the trajectory of session "s2" is not re-derived`},
		{"a session's trajectory made up", func(tx *store.Txn) error {
			return tx.Set([]byte("dec/t/s9"), []byte(`{"len":0,"counts":[0,0,0,0,0,0,0],"recall_run":0,"longest_recall_run":0,"recall_before_send":false,"send_without_recall":false,"bigrams":[0,0,0,0,0],"external_sends":0,"unknown_recipient_sends":0,"untrusted_recipient_sends":0}`))
		}, false, `the trajectory features of session "s9" is not re-derived`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(w.Dir)); err != nil {
				t.Fatal(err)
			}
			edit(t, dir, c.edit)
			e, err := pedigree.Open(t.Context(), dir, opt, pedigree.WithoutDurabilityUnsafe(), pedigree.WithEngineKeyFile(pedigree.DefaultEngineKeyFile(w.Dir)))
			if err != nil {
				t.Fatalf("a trajectory edit refused at open: %v", err)
			}
			defer e.Close()
			r, err := e.Verify(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range r.Problems {
				found = found || strings.Contains(p.What, c.report)
			}
			if !found {
				t.Errorf("verify: want %q among %+v", c.report, r.Problems)
			}
			d, err := e.Check(t.Context(), w.Keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: "s2", Tool: "lookup", Args: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			refused := d.Decision == gate.Deny && strings.Contains(strings.Join(d.Reasons, " "), "trajectory rows were edited")
			if refused != c.atUse {
				t.Errorf("a check on the edited trajectory: %s %v (want refused: %v)", d.Decision, d.Reasons, c.atUse)
			}
		})
	}
}
