package lineage_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
)

// planCalls is a plan of two steps, a call citing each and a call citing
// none, in session s.
func planCalls(t *testing.T, w *world) (plan, first, second, plain string) {
	t.Helper()
	prompt := w.record("user:alice", "s", "pay the bill in bill.txt", nil)
	st := w.statement("agent:planner", "s", "", []lineage.Parent{{ID: prompt.ID, Weight: 1}})
	st.Kind = lineage.KindPlan
	st.Steps = []lineage.PlanStep{{Tool: "file_read", Args: []byte(`{"path":"bill.txt"}`)}, {Tool: "pay", Args: []byte(`{"iban":` + string(lineage.FromStep(0)) + `}`)}}
	p, err := w.store(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cite := func(step int, args string) string {
		st := w.statement("agent:planner", "s", "", []lineage.Parent{{ID: p.ID, Weight: 1}})
		st.Kind, st.Tool, st.Args, st.Plan = lineage.KindCall, []string{"file_read", "pay"}[step], []byte(args), &lineage.PlanRef{ID: p.ID, Step: step}
		n, err := w.store(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	first, second = cite(0, `{"path":"bill.txt"}`), cite(1, `{"iban":"DE89"}`)
	plain = w.call("agent:planner", "s", "pay", `{"iban":"DE89"}`, []lineage.Parent{{ID: prompt.ID, Weight: 1}}).ID
	return p.ID, first, second, plain
}

func planCallsIn(t *testing.T, w *world, plan string, step int) []string {
	t.Helper()
	var ids []string
	err := w.space().View(func(tx kv.Txn) error {
		calls, err := w.g.PlanCallsIn(tx, plan, step)
		for _, c := range calls {
			ids = append(ids, c.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// The plan-call index finds the stored calls that cite a plan step, each
// once, and no other.
func TestPlanCallsIn(t *testing.T) {
	w := newWorld(t)
	plan, first, second, _ := planCalls(t, w)
	if got := planCallsIn(t, w, plan, 0); !slices.Equal(got, []string{first}) {
		t.Errorf("step 0: %v, want %v", got, []string{first})
	}
	if got := planCallsIn(t, w, plan, 1); !slices.Equal(got, []string{second}) {
		t.Errorf("step 1: %v, want %v", got, []string{second})
	}
	if got := planCallsIn(t, w, plan, 2); len(got) != 0 {
		t.Errorf("step 2: %v", got)
	}
	if r := w.verify(); len(r.Problems) != 0 {
		t.Fatalf("verify: %+v", r.Problems)
	}
}

// A row added behind the engine's back makes no call cite a step: the
// look-up reads each call's signed statement, and verify names the row. A
// deleted row is named by verify.
func TestPlanCallIndexTampered(t *testing.T) {
	row := func(plan string, step int, id string) []byte {
		return append(binary.BigEndian.AppendUint32([]byte("pc/"+plan+"\x00"), uint32(step)), id...)
	}
	for name, c := range map[string]struct {
		edit func(tx kv.Txn, plan, first, second, plain string) error
		bad  func(first, second, plain string) string
	}{
		"a call of another step": {
			func(tx kv.Txn, plan, first, _, _ string) error { return tx.Set(row(plan, 1, first), nil) },
			func(first, _, _ string) string { return first },
		},
		"a call citing no plan": {
			func(tx kv.Txn, plan, _, _, plain string) error { return tx.Set(row(plan, 1, plain), nil) },
			func(_, _, plain string) string { return plain },
		},
		"no entry": {
			func(tx kv.Txn, plan, _, _, _ string) error {
				return tx.Set(row(plan, 1, strings.Repeat("ab", 32)), nil)
			},
			func(_, _, _ string) string { return strings.Repeat("ab", 32) },
		},
		"no separator": {
			func(tx kv.Txn, plan, _, second, _ string) error { return tx.Set([]byte("pc/"+plan+second), nil) },
			func(_, _, _ string) string { return "" },
		},
		"deleted": {
			func(tx kv.Txn, plan, _, second, _ string) error { return tx.Delete(row(plan, 1, second)) },
			func(_, second, _ string) string { return second },
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			plan, first, second, plain := planCalls(t, w)
			w.tamper(func(tx kv.Txn) error { return c.edit(tx, plan, first, second, plain) })
			if got := planCallsIn(t, w, plan, 1); len(got) > 1 || (len(got) == 1 && got[0] != second) {
				t.Fatalf("step 1 after the edit: %v", got)
			}
			wantProblem(t, w.verify(), c.bad(first, second, plain), "plan-call index")
		})
	}
}

// A step cited by more calls than a look-up reads is an error, never a
// partial answer.
func TestPlanCallsInBound(t *testing.T) {
	w := newWorld(t)
	plan, _, _, _ := planCalls(t, w)
	for i := range lineage.MaxPlanCalls - 1 {
		st := w.statement("agent:planner", "s", "", []lineage.Parent{{ID: plan, Weight: 1}})
		st.Kind, st.Tool, st.Args, st.Plan = lineage.KindCall, "pay", []byte(fmt.Sprintf(`{"iban":"DE%d"}`, i)), &lineage.PlanRef{ID: plan, Step: 1}
		if _, err := w.store(st, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := planCallsIn(t, w, plan, 1); len(got) != lineage.MaxPlanCalls {
		t.Fatalf("%d calls, want %d", len(got), lineage.MaxPlanCalls)
	}
	st := w.statement("agent:planner", "s", "", []lineage.Parent{{ID: plan, Weight: 1}})
	st.Kind, st.Tool, st.Args, st.Plan = lineage.KindCall, "pay", []byte(`{"iban":"one too many"}`), &lineage.PlanRef{ID: plan, Step: 1}
	if _, err := w.store(st, nil); err != nil {
		t.Fatal(err)
	}
	err := w.space().View(func(tx kv.Txn) error {
		_, err := w.g.PlanCallsIn(tx, plan, 1)
		return err
	})
	if !errors.Is(err, lineage.ErrPlan) {
		t.Fatalf("over the bound: %v, want ErrPlan", err)
	}
}
