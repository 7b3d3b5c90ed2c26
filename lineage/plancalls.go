package lineage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/pedigree-ai/pedigree/kv"
)

// The plan-call index finds the stored calls that cite a plan step: a
// delegated argument is confirmed once per step, so the gate needs to know
// whether the step was carried out before. One key per call that cites a
// plan, written in the transaction that stores the call; every hit is read
// back from the call's verified envelope, so a key added behind the
// engine's back cannot make a call cite a step it does not. A deleted key
// hides an earlier call, and verify names it.
const pPlanCall = "pc/" // pc/<plan id>\x00<step, 4 bytes big-endian><call id> -> empty

// MaxPlanCalls bounds the calls one look-up of a plan step reads; a step
// cited by more is an error (ErrPlan), never a partial answer: a call left
// unread could be the one that carried the step out.
const MaxPlanCalls = 64

func planCallPrefix(plan string, step int) []byte {
	return binary.BigEndian.AppendUint32([]byte(pPlanCall+plan+"\x00"), uint32(step))
}

func planCallKey(plan string, step int, id string) []byte {
	return append(planCallPrefix(plan, step), id...)
}

// indexPlanCall adds a call that cites a plan step to the index, inside the
// transaction that stores it.
func indexPlanCall(t kv.Txn, st *Statement, id string) error {
	if st.Kind != KindCall || st.Plan == nil {
		return nil
	}
	return t.Set(planCallKey(st.Plan.ID, st.Plan.Step, id), nil)
}

// StepCall is a stored call that cites a plan step, as read from its
// verified envelope.
type StepCall struct {
	ID        string
	Statement *Statement
}

// PlanCallsIn returns, inside t, the stored calls that cite step of plan,
// in ID order; each one's envelope verified and citing that step, or it is
// left out. More than MaxPlanCalls index rows is an error.
func (g *Graph) PlanCallsIn(t kv.Txn, plan string, step int) ([]StepCall, error) {
	var out []StepCall
	rows := 0
	prefix := planCallPrefix(plan, step)
	err := t.Iterate(prefix, false, func(k, _ []byte) error {
		if rows++; rows > MaxPlanCalls {
			return fmt.Errorf("%w: more than %d calls cite plan %s step %d", ErrPlan, MaxPlanCalls, plan[:12], step)
		}
		id := string(k[len(prefix):])
		st, err := g.StatementIn(t, id)
		if errors.Is(err, ErrUnknownEntry) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("a call citing plan %s step %d: %w", plan[:12], step, err)
		}
		if st.Kind != KindCall || st.Plan == nil || st.Plan.ID != plan || st.Plan.Step != step {
			return nil // not what the key says: ignored, never trusted
		}
		out = append(out, StepCall{ID: id, Statement: st})
		return nil
	})
	return out, err
}

// verifyPlanCallIndex re-derives the plan-call index from the verified
// entries' statements: every call that cites a plan step has its row, and
// every row names such a call.
func verifyPlanCallIndex(ctx context.Context, t kv.Txn, stmts map[string]*Statement, bad func(id, f string, a ...any)) error {
	for id, st := range stmts {
		if st.Kind != KindCall || st.Plan == nil {
			continue
		}
		if ok, err := t.Has(planCallKey(st.Plan.ID, st.Plan.Step, id)); err != nil {
			return err
		} else if !ok {
			bad(id, "call missing from the plan-call index")
		}
	}
	return t.Iterate([]byte(pPlanCall), false, func(k, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rest := string(k[len(pPlanCall):])
		plan, tail, ok := strings.Cut(rest, "\x00")
		if !ok || len(tail) != 4+64 {
			bad("", "plan-call index row %q that no call accounts for", rest)
			return nil
		}
		step, id := int(binary.BigEndian.Uint32([]byte(tail[:4]))), tail[4:]
		if st := stmts[id]; st == nil || st.Kind != KindCall || st.Plan == nil || st.Plan.ID != plan || st.Plan.Step != step {
			bad(id, "plan-call index row that no call accounts for")
		}
		return nil
	})
}
