package rollup

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

const (
	// At is the context length past which a session is rolled up.
	At = 512
	// Chunk is how many context entries one rollup covers.
	Chunk = 512
)

// Rollup is one summary entry and how many context entries it covers.
type Rollup struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// Backend is what rolling up needs of the engine.
type Backend interface {
	Context(ctx context.Context, session string) ([]string, error)
	Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, error)
	Show(ctx context.Context, id string) (*pedigree.EntryView, error)
}

// Memory is where a session's rollups are remembered between calls.
type Memory interface {
	Rollups(session string) []Rollup
	PutRollups(session string, rs []Rollup) error
}

// Justification is the justification of a call in session: the whole
// context while it is small (nil for an empty one: the engine decides what
// that means), else the rollups and the context's tail, and then rolled
// is true. Rollups are signed by agent through signer, called only when
// one is made.
func Justification(ctx context.Context, b Backend, m Memory, agent string, signer func() (*registry.Signer, error), session string) (just []string, rolled bool, err error) {
	ids, err := b.Context(ctx, session)
	if err != nil {
		return nil, false, err
	}
	if len(ids) == 0 {
		return nil, false, nil
	}
	if len(ids) <= At {
		return ids, false, nil
	}
	rs := verified(ctx, b, agent, m.Rollups(session), ids)
	covered := 0
	for _, r := range rs {
		covered += r.N
	}
	if len(ids)-covered > Chunk {
		s, err := signer()
		if err != nil {
			return nil, false, err
		}
		for len(ids)-covered > Chunk {
			chunk := ids[covered : covered+Chunk]
			parents := make([]lineage.Parent, len(chunk))
			for i, id := range chunk {
				parents[i] = lineage.Parent{ID: id, Weight: 1}
			}
			n, err := b.Record(ctx, s, pedigree.Entry{Principal: agent, Kind: lineage.KindSummary,
				Content: fmt.Appendf(nil, "entries %d to %d of session %s", covered, covered+len(chunk)-1, session), Parents: parents})
			if err != nil {
				return nil, false, fmt.Errorf("rolling up session %.64q: %w", session, err)
			}
			rs = append(rs, Rollup{ID: n.ID, N: len(chunk)})
			covered += len(chunk)
		}
		if err := m.PutRollups(session, rs); err != nil {
			return nil, false, err
		}
	}
	out := make([]string, 0, len(rs)+len(ids)-covered)
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return append(out, ids[covered:]...), true, nil
}

// verified are the remembered rollups that the store shows are what they
// claim: the agent's summaries, each deriving with strong edges from
// exactly its chunk of the context, in order. The first that is not ends
// the list, and the rest is rolled up again.
func verified(ctx context.Context, b Backend, agent string, rs []Rollup, ids []string) []Rollup {
	covered := 0
	for i, r := range rs {
		v, err := b.Show(ctx, r.ID)
		ok := err == nil && v.SignatureError == "" && v.Node.Principal == agent && v.Node.Kind == lineage.KindSummary &&
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

// InMemory remembers rollups for the life of a process.
type InMemory struct {
	mu sync.Mutex
	m  map[string][]Rollup
}

// Rollups are session's remembered rollups.
func (m *InMemory) Rollups(session string) []Rollup {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.m[session])
}

// PutRollups remembers session's rollups.
func (m *InMemory) PutRollups(session string, rs []Rollup) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string][]Rollup{}
	}
	m.m[session] = slices.Clone(rs)
	return nil
}
