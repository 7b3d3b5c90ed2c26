package decisionlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Rows of the decision log's namespace.
const (
	pDecision    = "g/"  // g/<decision id> -> the decision's JSON without its ID: the bytes its ID hashes
	pInput       = "gi/" // gi/<decision id> -> the policy input it was made on
	pDecisionSeq = "gq/" // gq/<seq> -> decision id
	pApproval    = "a/"  // a/<session>\x00<action>\x00<approval id> -> expiry (a hint; the signed entry decides)
	pUsed        = "au/" // au/<approval id> -> the decision id that used it
	pApproved    = "ad/" // ad/<decision id> -> its approval's id: one decision, one approval (a hint, refused at write)
	pTrajectory  = "t/"  // t/<session> -> trajectory.State
	pTrajCall    = "tc/" // tc/<session>\x00<seq> -> trajectory.Call
	pTrajAlert   = "ta/" // ta/<session>\x00<seq> -> trajectory.Alert
)

// ErrApprovalUsed: the approval was used by another decision meanwhile.
var ErrApprovalUsed = errors.New("approval already used")

// ErrLogged: the decision is in the log already (a copy of its record).
var ErrLogged = errors.New("the decision is logged already")

// Logged reports whether decision id is stored.
func (l *Log) Logged(t kv.Txn, id string) (bool, error) { return t.Has([]byte(pDecision + id)) }

// Log is the decision log.
type Log struct {
	store kv.Store
	model *trajectory.Model
}

// New returns the decision log kept in store; model, when not nil, adds its
// alerts to the trajectory's rules.
func New(store kv.Store, model *trajectory.Model) *Log {
	return &Log{store: store, model: model}
}

// Seal fixes a decision's ID: the sha256 of its record without the ID, which
// covers the digest of the logged input and the trajectory step the call
// appends to its session (nil when it appends none: a decision that failed
// closed). It returns the record's bytes. The step is sealed with the
// decision so that it is logged: verify re-derives every trajectory from
// the logged steps, and a fleet node applies the step the record holds.
func Seal(d *gate.Decision, input []byte, step *trajectory.Call) ([]byte, error) {
	d.ID, d.InputDigest = "", ""
	if input != nil {
		s := sha256.Sum256(input)
		d.InputDigest = hex.EncodeToString(s[:])
	}
	body, err := json.Marshal(sealed{Decision: d, Step: step})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	d.ID = hex.EncodeToString(sum[:])
	return body, nil
}

// sealed is a decision's record as stored and hashed into its ID: the
// decision and the trajectory step it appends. A reader that wants the
// decision alone decodes the record into a gate.Decision.
type sealed struct {
	*gate.Decision
	Step *trajectory.Call `json:"step,omitempty"`
}

// StepOf is the trajectory step sealed in a decision's record (nil when
// none): what a fleet node applies with a record from the stream.
func StepOf(body []byte) (*trajectory.Call, error) {
	var s struct {
		Step *trajectory.Call `json:"step"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, err
	}
	return s.Step, nil
}

// Append stores a sealed decision inside t with its append sequence (its log
// leaf's index + 1), its input, the use of its approval, and its step (nil
// when none) in its session's trajectory. The step must be the one sealed in
// body (given to Seal, or read by StepOf): verify replays the sealed one.
func (l *Log) Append(t kv.Txn, d *gate.Decision, body, input []byte, seq uint64, step *trajectory.Call) error {
	if d.Approval != "" {
		used := []byte(pUsed + d.Approval)
		if ok, err := t.Has(used); err != nil {
			return err
		} else if ok {
			return ErrApprovalUsed
		}
		if err := t.Set(used, []byte(d.ID)); err != nil {
			return err
		}
	}
	if err := t.Set([]byte(pDecision+d.ID), body); err != nil {
		return err
	}
	if input != nil {
		if err := t.Set([]byte(pInput+d.ID), input); err != nil {
			return err
		}
	}
	if err := t.Set(binary.BigEndian.AppendUint64([]byte(pDecisionSeq), seq), []byte(d.ID)); err != nil {
		return err
	}
	if step == nil || d.Session == "" {
		return nil
	}
	return l.appendStep(t, Step{Session: d.Session, Call: *step})
}

func approvalPrefix(session, action string) []byte {
	b := append([]byte(pApproval), session...)
	b = append(b, 0)
	b = append(b, action...)
	return append(b, 0)
}

// AddApproval indexes a stored approval entry inside t, so that the checks
// of its session and action find it.
func (l *Log) AddApproval(t kv.Txn, session, action, approvalID, expires string) error {
	return t.Set(append(approvalPrefix(session, action), approvalID...), []byte(expires))
}

// ErrApproved: the decision already has an approval.
var ErrApproved = errors.New("the decision is already approved: one decision, one approval")

// MarkApproved records inside t that decision has its approval, and
// refuses a second (ErrApproved).
func (l *Log) MarkApproved(t kv.Txn, decisionID, approvalID string) error {
	k := []byte(pApproved + decisionID)
	if ok, err := t.Has(k); err != nil {
		return err
	} else if ok {
		return ErrApproved
	}
	return t.Set(k, []byte(approvalID))
}

// Candidate is an indexed approval not yet used: a hint that the engine
// checks against the signed approval entry before it offers it to the
// policy.
type Candidate struct {
	ID string
}

// Candidates lists, inside t, the indexed approvals of this session and
// action that no decision has used.
func (l *Log) Candidates(t kv.Txn, session, action string) ([]Candidate, error) {
	var out []Candidate
	prefix := approvalPrefix(session, action)
	err := t.Iterate(prefix, false, func(k, _ []byte) error {
		id := string(k[len(prefix):])
		if used, err := t.Has([]byte(pUsed + id)); err != nil || used {
			return err
		}
		out = append(out, Candidate{ID: id})
		return nil
	})
	return out, err
}

// Approved reports inside t whether some approval of this decision is
// indexed already (one decision, one approval).
func (l *Log) Approved(t kv.Txn, d *gate.Decision) (bool, error) {
	found := false
	prefix := approvalPrefix(d.Session, d.ArgsDigest)
	err := t.Iterate(prefix, false, func(k, _ []byte) error {
		found = true
		return kv.ErrStop
	})
	return found, err
}

// Record is a logged decision with the exact input its policy saw.
type Record struct {
	gate.Decision
	Input []byte
}

// Record returns a logged decision by ID or unique prefix.
func (l *Log) Record(idOrPrefix string) (*Record, error) {
	if len(idOrPrefix) < lineage.MinPrefix {
		return nil, fmt.Errorf("%w: %q is too short an ID", gate.ErrUnknownDecision, idOrPrefix)
	}
	var found []string
	var body, input []byte
	err := l.store.View(func(t kv.Txn) error {
		err := t.Iterate([]byte(pDecision+idOrPrefix), true, func(k, v []byte) error {
			found = append(found, string(k[len(pDecision):]))
			body = bytes.Clone(v)
			if len(found) > 1 {
				return kv.ErrStop
			}
			return nil
		})
		if err != nil || len(found) != 1 {
			return err
		}
		input, err = t.Get([]byte(pInput + found[0]))
		if errors.Is(err, kv.ErrNotFound) {
			input, err = nil, nil
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, fmt.Errorf("%w %s", gate.ErrUnknownDecision, idOrPrefix)
	case len(found) > 1:
		return nil, fmt.Errorf("%w: %s is an ambiguous prefix", gate.ErrUnknownDecision, idOrPrefix)
	}
	r := &Record{Input: input}
	if err := json.Unmarshal(body, &r.Decision); err != nil {
		return nil, fmt.Errorf("decision %s: %w", idOrPrefix, err)
	}
	r.ID = found[0]
	return r, nil
}

// Decisions lists logged decisions in order, newest last; limit 0 lists all,
// otherwise the last limit; session, when set, keeps that session's only.
func (l *Log) Decisions(ctx context.Context, limit int, session string) ([]gate.Decision, error) {
	var out []gate.Decision
	err := l.store.View(func(t kv.Txn) error {
		return t.Iterate([]byte(pDecisionSeq), true, func(_, id []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			b, err := t.Get([]byte(pDecision + string(id)))
			if err != nil {
				return fmt.Errorf("decision %s: %w", id, err)
			}
			var d gate.Decision
			if err := json.Unmarshal(b, &d); err != nil {
				return fmt.Errorf("decision %s: %w", id, err)
			}
			if session != "" && d.Session != session {
				return nil
			}
			d.ID = string(id)
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	if out == nil {
		out = []gate.Decision{}
	}
	return out, nil
}

// VerifyDecision checks inside t that a logged decision is stored at seq and
// that its record hashes to its ID (which covers the digest of its input and
// its trajectory step). It returns the step (nil when none), which a
// verifier replays in log order (VerifyTrajectories).
func (l *Log) VerifyDecision(t kv.Txn, id string, seq uint64) (*Step, error) {
	b, err := t.Get([]byte(pDecision + id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, errors.New("the logged decision is missing")
	}
	if err != nil {
		return nil, err
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != id {
		return nil, errors.New("the decision record was rewritten: it does not hash to its ID")
	}
	var d gate.Decision
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("the decision record does not decode: %v", err)
	}
	call, err := StepOf(b)
	if err != nil {
		return nil, fmt.Errorf("the decision's trajectory step does not decode: %v", err)
	}
	var step *Step
	if call != nil && d.Session != "" {
		step = &Step{Session: d.Session, Call: *call}
	}
	in, err := t.Get([]byte(pInput + id))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		if d.InputDigest != "" {
			return nil, errors.New("the decision's logged input was deleted")
		}
	case err != nil:
		return nil, err
	default:
		if s := sha256.Sum256(in); hex.EncodeToString(s[:]) != d.InputDigest {
			return nil, errors.New("the decision's logged input was rewritten")
		}
	}
	if got, err := t.Get(binary.BigEndian.AppendUint64([]byte(pDecisionSeq), seq)); err != nil || string(got) != id {
		return nil, errors.New("the decision's place in the append order is missing or names another")
	}
	if d.Approval != "" {
		if used, err := t.Get([]byte(pUsed + d.Approval)); err != nil || string(used) != id {
			return nil, fmt.Errorf("the use of approval %s by this decision is not recorded", d.Approval)
		}
	}
	return step, nil
}

// DecisionIDs lists inside t every stored decision with its sequence.
func (l *Log) DecisionIDs(t kv.Txn) (map[string]uint64, error) {
	ids := map[string]uint64{}
	err := t.Iterate([]byte(pDecisionSeq), true, func(k, v []byte) error {
		ids[string(v)] = binary.BigEndian.Uint64(k[len(pDecisionSeq):])
		return nil
	})
	return ids, err
}

// Used lists inside t every recorded approval use: approval -> decision.
func (l *Log) Used(t kv.Txn) (map[string]string, error) {
	out := map[string]string{}
	err := t.Iterate([]byte(pUsed), true, func(k, v []byte) error {
		out[string(k[len(pUsed):])] = string(v)
		return nil
	})
	return out, err
}

// ParseExpiry reads an approval's signed expiry.
func ParseExpiry(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// VerifiedRecord returns, inside t, the logged decision with this full ID
// after checking that its record hashes to the ID: what an approval names
// must be the decision that was logged, not a row written beside it.
func (l *Log) VerifiedRecord(t kv.Txn, id string) (*gate.Decision, error) {
	body, err := t.Get([]byte(pDecision + id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("%w %s", gate.ErrUnknownDecision, id)
	}
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != id {
		return nil, fmt.Errorf("decision %s: the record does not hash to its ID", id)
	}
	var d gate.Decision
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("decision %s: %w", id, err)
	}
	d.ID = id
	return &d, nil
}

// Uses reports, inside t, whether the logged decision id spends approval,
// after checking that its record is stored and hashes to id: a record
// missing or rewritten is an error, never a "no".
func (l *Log) Uses(t kv.Txn, id, approval string) (bool, error) {
	body, err := t.Get([]byte(pDecision + id))
	if errors.Is(err, kv.ErrNotFound) {
		return false, fmt.Errorf("the logged decision %s is missing", id)
	}
	if err != nil {
		return false, err
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != id {
		return false, fmt.Errorf("decision %s: the record does not hash to its ID", id)
	}
	if !bytes.Contains(body, []byte(approval)) {
		return false, nil // it cannot name it
	}
	var d struct {
		Approval string `json:"approval"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return false, fmt.Errorf("decision %s: %w", id, err)
	}
	return d.Approval == approval, nil
}
