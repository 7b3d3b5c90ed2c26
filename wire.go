package pedigree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
)

// A record on the fleet's stream. Entries travel as their signed envelopes
// and are verified again by every node that applies them; a decision
// travels as its sealed record (which hashes to its ID and holds its
// trajectory step), its input (which hashes to the digest the record holds),
// and the call entry's envelope when it is stored with it.
type wireRecord struct {
	Version    int             `json:"version"`
	Envelope   []byte          `json:"envelope,omitempty"`
	Content    []byte          `json:"content,omitempty"`
	HasContent bool            `json:"has_content,omitempty"`
	Decision   []byte          `json:"decision,omitempty"`
	Input      []byte          `json:"input,omitempty"`
	Recall     *lineage.Recall `json:"recall,omitempty"`
}

// wireMessage is a record ready to publish: its kind and subject key, its
// de-duplication ID, and whether it is create-only on its subject.
type wireMessage struct {
	kind       fleet.Kind
	key, id    string
	data       []byte
	createOnly bool
}

// encode is r as it goes on the stream.
func (r *record) encode() (*wireMessage, error) {
	w := wireRecord{Version: 1}
	if r.entry != nil {
		w.Envelope = r.entry.Envelope()
		if c := r.entry.Content(); c != nil {
			w.Content, w.HasContent = c, true
		}
	}
	m := &wireMessage{}
	switch r.kind {
	case recEntry, recApproval, recRejection:
		// Not create-only: anyone who can publish could squat an
		// entry's subject. Copies are harmless: apply stores an entry once.
		m.kind, m.key, m.id = fleet.Entry, r.entry.Node.ID, r.entry.Node.ID
		switch r.kind {
		case recApproval:
			m.kind = fleet.Approval
		case recRejection:
			m.kind = fleet.Rejection
		}
	case recDecision:
		w.Decision, w.Input = r.body, r.input
		m.kind, m.key, m.id = fleet.Decision, r.decision.ID, r.decision.ID
		if r.decision.Approval != "" {
			// The use of an approval, on the approval's subject. Not
			// create-only: anyone who can publish could keep the subject
			// taken with junk. Single use is the applier's: every node
			// applies the first use in the stream and refuses any later
			// one (decisionlog.ErrApprovalUsed), so the loser's publish
			// comes back refused and its check decides again.
			m.kind, m.key = fleet.Use, r.decision.Approval
		}
	case recRecall:
		w.Recall = r.recall
		id := r.recall.RecallID()
		m.kind, m.key, m.id = fleet.Recall, id, id
	default:
		return nil, errUnknownRecord
	}
	var err error
	m.data, err = json.Marshal(w)
	return m, err
}

// decode verifies a record from the stream, whose engine signature was
// checked (fleetsig.go), and makes it applicable: every envelope is verified against the frozen registry (and its parents must
// be applied already), a decision must hash to its ID and its input to its
// digest, and the subject's key must be what the record is. Any failure is
// a refusal: the record is not applied.
func (e *Engine) decode(ctx context.Context, kind fleet.Kind, key string, data []byte) (*record, error) {
	var w wireRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", lineage.ErrMalformed, err)
	}
	if w.Version != 1 {
		return nil, fmt.Errorf("%w: record version %d", lineage.ErrMalformed, w.Version)
	}
	var content []byte
	if w.HasContent {
		content = w.Content
		if content == nil {
			content = []byte{}
		}
	}
	prepare := func() (*lineage.Pending, error) {
		if w.Envelope == nil {
			return nil, fmt.Errorf("%w: no envelope", lineage.ErrMalformed)
		}
		return e.graph.Prepare(ctx, w.Envelope, content)
	}
	r := &record{}
	switch kind {
	case fleet.Entry, fleet.Approval, fleet.Rejection:
		r.kind = recEntry
		p, err := prepare()
		if err != nil {
			return nil, err
		}
		if p.Node.ID != key {
			return nil, fmt.Errorf("%w: entry %s on the subject of %s", lineage.ErrMalformed, p.Node.ID, key)
		}
		if (p.Statement.Kind == lineage.KindApproval) != (kind == fleet.Approval) ||
			(p.Statement.Kind == lineage.KindRejection) != (kind == fleet.Rejection) {
			return nil, fmt.Errorf("%w: a %s entry published as %s", lineage.ErrMalformed, p.Statement.Kind, kind)
		}
		switch kind {
		case fleet.Approval:
			// Checked at its signing time: the same verdict on every
			// node, whenever it applies it (expiry is checked at use).
			signed, err := time.Parse(time.RFC3339Nano, p.Statement.Time)
			if err != nil {
				return nil, fmt.Errorf("%w: approval time %q", lineage.ErrMalformed, p.Statement.Time)
			}
			if _, err := e.checkApproval(p.Statement, signed); err != nil {
				return nil, err
			}
			r.kind = recApproval
		case fleet.Rejection:
			if _, err := e.checkRejection(p.Statement); err != nil {
				return nil, err
			}
			r.kind = recRejection
		}
		r.entry = p
	case fleet.Decision, fleet.Use:
		r.kind = recDecision
		if w.Content != nil || w.HasContent || w.Recall != nil {
			return nil, fmt.Errorf("%w: a decision record with content or a recall", lineage.ErrMalformed)
		}
		d := new(gate.Decision)
		if err := json.Unmarshal(w.Decision, d); err != nil {
			return nil, fmt.Errorf("%w: decision: %v", lineage.ErrMalformed, err)
		}
		if d.ID != "" {
			return nil, fmt.Errorf("%w: a sealed decision holds no ID", lineage.ErrMalformed)
		}
		// Its session keys the decision log's rows (its trajectory): one
		// no statement could name is refused here, not left to the store
		// to fail on (a store error is retried forever: the applier would
		// stop at it on every node).
		if !lineage.ValidSession(d.Session) {
			return nil, fmt.Errorf("%w: a decision of a session no statement may name (%d bytes)", lineage.ErrMalformed, len(d.Session))
		}
		sum := sha256.Sum256(w.Decision)
		d.ID = hex.EncodeToString(sum[:])
		digest := ""
		if w.Input != nil {
			s := sha256.Sum256(w.Input)
			digest = hex.EncodeToString(s[:])
		}
		if digest != d.InputDigest {
			return nil, fmt.Errorf("%w: the decision's input does not match its digest", lineage.ErrMalformed)
		}
		switch {
		case kind == fleet.Decision && (d.Approval != "" || key != d.ID):
			return nil, fmt.Errorf("%w: decision %s on the subject of %s", lineage.ErrMalformed, d.ID, key)
		case kind == fleet.Use && (d.Approval == "" || key != d.Approval):
			return nil, fmt.Errorf("%w: decision %s using approval %q on the subject of %s", lineage.ErrMalformed, d.ID, d.Approval, key)
		}
		if d.Approval != "" {
			var st *lineage.Statement
			err := e.db.View(func(t *store.Txn) error {
				var err error
				st, _, err = e.graph.ApprovalIn(t.In(store.Lineage), d.Approval)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("decision %s uses approval %s: %w", d.ID, d.Approval, err)
			}
			if st.Session != d.Session || st.Approval.Action != d.ArgsDigest {
				return nil, fmt.Errorf("%w: decision %s uses an approval of another session or action", gate.ErrApproval, d.ID)
			}
		}
		if w.Envelope != nil {
			p, err := prepare()
			if err != nil {
				return nil, err
			}
			if p.Statement.Kind != lineage.KindCall || p.Node.ID != d.CallID {
				return nil, fmt.Errorf("%w: decision %s stored with entry %s, not its call %s", lineage.ErrMalformed, d.ID, p.Node.ID, d.CallID)
			}
			r.entry = p
		}
		step, err := decisionlog.StepOf(w.Decision)
		if err != nil {
			return nil, fmt.Errorf("%w: decision step: %v", lineage.ErrMalformed, err)
		}
		r.decision, r.body, r.input, r.step = d, w.Decision, w.Input, step
	case fleet.Recall:
		r.kind = recRecall
		if w.Recall == nil || w.Envelope != nil || w.Decision != nil {
			return nil, fmt.Errorf("%w: a recall record holds a recall only", lineage.ErrMalformed)
		}
		if err := w.Recall.Validate(); err != nil {
			return nil, err
		}
		if w.Recall.RecallID() != key {
			return nil, fmt.Errorf("%w: recall %s on the subject of %s", lineage.ErrMalformed, w.Recall.RecallID(), key)
		}
		r.recall = w.Recall
	default:
		return nil, fmt.Errorf("%w: a record of kind %q", lineage.ErrMalformed, kind)
	}
	return r, nil
}

// refusal reports whether an error from apply is the record's fault (the
// same on every node, so the record is refused) rather than the store's.
func refusal(err error) bool {
	return errors.Is(err, decisionlog.ErrApprovalUsed) || errors.Is(err, decisionlog.ErrApproved) || errors.Is(err, decisionlog.ErrLogged) ||
		errors.Is(err, gate.ErrApproval) || errors.Is(err, gate.ErrRejected) || errors.Is(err, lineage.ErrUnknownEntry) ||
		errors.Is(err, lineage.ErrUnknownParent) || errors.Is(err, lineage.ErrMalformed)
}
