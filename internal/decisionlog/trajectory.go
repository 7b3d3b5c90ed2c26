package decisionlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// A session's trajectory is derived data: each logged decision's record
// holds the step its call appends (sealed with it, so it is in the Merkle
// log), and each logged recall appends a recall step. Appending the same
// steps in log order with the same model gives the same rows, which is how
// verify checks them (VerifyTrajectories). A check reads only the features
// row, and checks it against the session's calls first (TrajectoryIn).

// Step is one step of a session's trajectory as the log holds it.
type Step struct {
	Session string
	Call    trajectory.Call
}

// RecallStep is the step a logged recall appends to its session.
func RecallStep(session string) Step {
	return Step{Session: session, Call: trajectory.Call{Tool: "memory_recall", Role: trajectory.Recall}}
}

func trajKey(prefix, session string, seq uint64) []byte {
	b := append([]byte(prefix), session...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

// state reads a session's features row as it is stored.
func (l *Log) state(t kv.Txn, session string) (*trajectory.State, error) {
	s := &trajectory.State{}
	b, err := t.Get([]byte(pTrajectory + session))
	if errors.Is(err, kv.ErrNotFound) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("the trajectory of session %s does not decode: %v: %w", session, err, registry.ErrTampered)
	}
	return s, nil
}

// TrajectoryIn returns, inside t, a session's trajectory features, without
// its calls and alerts (see Trajectory), for a check to decide on.
//
// It refuses (with an error wrapping registry.ErrTampered) features that do
// not agree with the session's stored calls: counts that do not add up to
// its length, a length that is not its number of calls, a last role that is
// not its last call's. A deleted or rewritten features row is refused at
// use; rows rewritten to agree with each other are caught by verify, which
// re-derives them from the log.
func (l *Log) TrajectoryIn(t kv.Txn, session string) (*trajectory.State, error) {
	s, err := l.state(t, session)
	if err != nil {
		return nil, err
	}
	tampered := func(what string) error {
		return fmt.Errorf("the trajectory of session %s (%d calls) %s: trajectory rows were edited: %w", session, s.Len, what, registry.ErrTampered)
	}
	sum := 0
	for _, n := range s.Counts {
		sum += n
	}
	if sum != s.Len {
		return nil, tampered(fmt.Sprintf("counts %d calls by role", sum))
	}
	kept := uint64(min(s.Len, trajectory.MaxKeptCalls))
	if kept > 0 {
		b, err := t.Get(trajKey(pTrajCall, session, kept-1))
		if errors.Is(err, kv.ErrNotFound) {
			return nil, tampered(fmt.Sprintf("has no call %d", kept-1))
		}
		if err != nil {
			return nil, err
		}
		var last trajectory.Call
		if err := json.Unmarshal(b, &last); err != nil {
			return nil, tampered(fmt.Sprintf("has a call %d that does not decode", kept-1))
		}
		if s.Len <= trajectory.MaxKeptCalls && last.Role != s.Last {
			return nil, tampered(fmt.Sprintf("ends in a %s call, not %s", last.Role, s.Last))
		}
	}
	if more, err := t.Has(trajKey(pTrajCall, session, kept)); err != nil {
		return nil, err
	} else if more {
		return nil, tampered(fmt.Sprintf("has a call %d", kept))
	}
	return s, nil
}

// Trajectory returns a session's trajectory with its calls and alerts.
func (l *Log) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	var s *trajectory.State
	err := l.store.View(func(t kv.Txn) error {
		var err error
		if s, err = l.state(t, session); err != nil {
			return err
		}
		prefix := append([]byte(pTrajCall+session), 0)
		if err := t.Iterate(prefix, true, func(_, v []byte) error {
			var c trajectory.Call
			s.Calls = append(s.Calls, c)
			return json.Unmarshal(v, &s.Calls[len(s.Calls)-1])
		}); err != nil {
			return err
		}
		prefix = append([]byte(pTrajAlert+session), 0)
		return t.Iterate(prefix, true, func(_, v []byte) error {
			var a trajectory.Alert
			s.Alerts = append(s.Alerts, a)
			return json.Unmarshal(v, &s.Alerts[len(s.Alerts)-1])
		})
	})
	return s, err
}

// ObserveRecall appends, inside t, the step of a logged recall to its
// session's trajectory.
func (l *Log) ObserveRecall(t kv.Txn, session string) error {
	return l.appendStep(t, RecallStep(session))
}

// appendStep appends a step to its session's trajectory inside t. It
// extends the features as stored: refusing here would refuse the write
// that logs the step, and verify reports rows that do not re-derive.
func (l *Log) appendStep(t kv.Txn, st Step) error {
	s, err := l.state(t, st.Session)
	if err != nil {
		return err
	}
	rows, err := l.stepRows(s, st)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := t.Set(r.key, r.value); err != nil {
			return err
		}
	}
	return nil
}

type row struct{ key, value []byte }

// stepRows appends st to s, its session's features before it, and returns
// the rows that record it: the features, the call (while the session has
// fewer than MaxKeptCalls), and each alert it raises.
func (l *Log) stepRows(s *trajectory.State, st Step) ([]row, error) {
	at := uint64(s.Len)
	alerts := s.Observe(st.Call, l.model)
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	rows := []row{{[]byte(pTrajectory + st.Session), b}}
	if at < trajectory.MaxKeptCalls {
		b, err := json.Marshal(st.Call)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{trajKey(pTrajCall, st.Session, at), b})
	}
	for i, a := range alerts {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{trajKey(pTrajAlert, st.Session, at<<8|uint64(i)), b})
	}
	return rows, nil
}

// VerifyTrajectories re-derives, inside t, every session's trajectory from
// steps (the logged decisions' and recalls' steps, in log order) with this
// log's model, and reports to bad each trajectory row that differs from the
// re-derived one, is missing, or is extra. Alerts of the model are
// re-derived with the model this log was given: a store written with
// another model reports its model alerts as differing.
func (l *Log) VerifyTrajectories(ctx context.Context, t kv.Txn, steps []Step, bad func(id, f string, a ...any)) error {
	want := map[string][]byte{}
	states := map[string]*trajectory.State{}
	for _, st := range steps {
		s := states[st.Session]
		if s == nil {
			s = &trajectory.State{}
			states[st.Session] = s
		}
		rows, err := l.stepRows(s, st)
		if err != nil {
			return err
		}
		s.Calls, s.Alerts = nil, nil // only the rows are compared
		for _, r := range rows {
			want[string(r.key)] = r.value
		}
	}
	for _, prefix := range []string{pTrajectory, pTrajCall, pTrajAlert} {
		err := t.Iterate([]byte(prefix), true, func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			w, ok := want[string(k)]
			switch {
			case !ok:
				bad("", "%s is not re-derived from the logged decisions and recalls: the row is extra", trajRow(k))
			case !bytes.Equal(w, v):
				bad("", "%s differs from the one re-derived from the logged decisions and recalls", trajRow(k))
			}
			delete(want, string(k))
			return nil
		})
		if err != nil {
			return err
		}
	}
	missing := make([]string, 0, len(want))
	for k := range want {
		missing = append(missing, k)
	}
	slices.Sort(missing)
	for _, k := range missing {
		bad("", "%s, re-derived from the logged decisions and recalls, is missing", trajRow([]byte(k)))
	}
	return nil
}

// trajRow names a trajectory row for a report.
func trajRow(k []byte) string {
	var prefix, what string
	switch {
	case bytes.HasPrefix(k, []byte(pTrajectory)):
		return fmt.Sprintf("the trajectory features of session %q", k[len(pTrajectory):])
	case bytes.HasPrefix(k, []byte(pTrajCall)):
		prefix, what = pTrajCall, "call"
	default:
		prefix, what = pTrajAlert, "alert"
	}
	rest := k[len(prefix):]
	if len(rest) < 9 || rest[len(rest)-9] != 0 {
		return fmt.Sprintf("the trajectory row %q", k)
	}
	seq := binary.BigEndian.Uint64(rest[len(rest)-8:])
	if what == "alert" {
		return fmt.Sprintf("alert %d of call %d in the trajectory of session %q", seq&0xff, seq>>8, rest[:len(rest)-9])
	}
	return fmt.Sprintf("call %d in the trajectory of session %q", seq, rest[:len(rest)-9])
}
