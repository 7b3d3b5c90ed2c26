package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
)

// A Claude Code session can hold more entries than one call may name as
// parents (lineage.MaxParents). Past rollupAt entries, the oldest are rolled
// up, rollupChunk at a time, into summary entries signed by the agent, each
// deriving from its chunk with strong edges; a call's justification is then
// the rollups and the rest of the context. Strong edges carry both labels,
// so the gate decides as it would on the whole context, and a trace reaches
// every root through the rollups.
const (
	rollupAt    = 512
	rollupChunk = 512
)

// rollup is one summary entry and how many context entries it covers.
type rollup struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// justification is the justification of a call in session: the whole
// context while it is small, else rollups and the context's tail.
func (h *Handler) justification(ctx context.Context, session string) ([]string, error) {
	ids, err := h.b.Context(ctx, session)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil // nothing in context: the engine decides what an empty one means
	}
	if len(ids) <= rollupAt {
		return ids, nil
	}
	rs := h.verifiedRollups(ctx, session, ids)
	covered := 0
	for _, r := range rs {
		covered += r.N
	}
	if len(ids)-covered > rollupChunk {
		s, err := h.signer(ctx, h.m.Agent)
		if err != nil {
			return nil, err
		}
		for len(ids)-covered > rollupChunk {
			chunk := ids[covered : covered+rollupChunk]
			parents := make([]lineage.Parent, len(chunk))
			for i, id := range chunk {
				parents[i] = lineage.Parent{ID: id, Weight: 1}
			}
			n, err := h.b.Record(ctx, s, pedigree.Entry{Principal: h.m.Agent, Kind: lineage.KindSummary,
				Content: fmt.Appendf(nil, "entries %d to %d of session %s", covered, covered+len(chunk)-1, session), Parents: parents})
			if err != nil {
				return nil, fmt.Errorf("rolling up session %s: %w", clip(session), err)
			}
			rs = append(rs, rollup{ID: n.ID, N: len(chunk)})
			covered += len(chunk)
		}
		if err := h.state.putRollups(session, rs); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(rs)+len(ids)-covered)
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return append(out, ids[covered:]...), nil
}

// verifiedRollups are the session's remembered rollups that the store
// shows are what they claim: the agent's summaries, each deriving with
// strong edges from exactly its chunk of the context, in order. The first
// that is not ends the list, and the rest is rolled up again.
func (h *Handler) verifiedRollups(ctx context.Context, session string, ids []string) []rollup {
	rs := h.state.rollups(session)
	covered := 0
	for i, r := range rs {
		v, err := h.b.Show(ctx, r.ID)
		ok := err == nil && v.SignatureError == "" && v.Node.Principal == h.m.Agent && v.Node.Kind == lineage.KindSummary &&
			r.N > 0 && covered+r.N <= len(ids) && len(v.Parents) == r.N
		for j := 0; ok && j < r.N; j++ {
			ok = v.Parents[j].Parent == ids[covered+j] && v.Parents[j].Strong
		}
		if !ok {
			return rs[:i]
		}
		covered += r.N
	}
	return rs
}

func (s *State) rollupPath(session string) string {
	return filepath.Join(s.session(session), "rollups.json")
}

func (s *State) rollups(session string) []rollup {
	b, err := s.read(s.rollupPath(session))
	if err != nil {
		return nil
	}
	var rs []rollup
	if json.Unmarshal(b, &rs) != nil {
		return nil
	}
	return rs
}

func (s *State) putRollups(session string, rs []rollup) error {
	b, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	return s.write(s.rollupPath(session), b)
}
