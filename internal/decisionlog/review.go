package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/kv"
)

// pReview: gr/<decision id> -> gate.Review JSON, a hint of who answered a
// deny or an ask. The signed approval or rejection entry it names is the
// evidence: the engine checks every row against its entry before it shows
// or uses it.
const pReview = "gr/"

func reviewKey(decisionID string) []byte { return []byte(pReview + decisionID) }

// ReviewIn reads a decision's review inside t (nil when none).
func (l *Log) ReviewIn(t kv.Txn, decisionID string) (*gate.Review, error) {
	b, err := t.Get(reviewKey(decisionID))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r gate.Review
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: review of decision %s: %v", gate.ErrReviewTampered, decisionID, err)
	}
	return &r, nil
}

// AddReview records a decision's review inside t. A rejection after any
// review, or an approval after a rejection, is refused (gate.ReviewConflict);
// a later approval of an approved decision leaves the first one as the
// review.
func (l *Log) AddReview(t kv.Txn, r gate.Review) error {
	prev, err := l.ReviewIn(t, r.DecisionID)
	if err != nil {
		return err
	}
	if prev != nil && (prev.Outcome == gate.Rejected || r.Outcome == gate.Rejected) {
		return gate.ReviewConflict(prev)
	}
	if prev != nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.Set(reviewKey(r.DecisionID), b)
}

// Reviews lists every review row inside t, in decision ID order.
func (l *Log) Reviews(t kv.Txn) ([]gate.Review, error) {
	var out []gate.Review
	err := t.Iterate([]byte(pReview), true, func(k, v []byte) error {
		var r gate.Review
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%w: review row %s: %v", gate.ErrReviewTampered, k, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
