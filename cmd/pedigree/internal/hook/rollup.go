package hook

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/rollup"
	"github.com/pedigree-ai/pedigree/registry"
)

// justification is the justification of a call in session: the whole
// context while it is small, else rollups and the context's tail
// (internal/rollup), remembered in the session's state between events.
func (h *Handler) justification(ctx context.Context, session string) ([]string, error) {
	just, _, err := rollup.Justification(ctx, h.b, stateRollups{h.state}, h.m.Agent,
		func() (*registry.Signer, error) { return h.signer(ctx, h.m.Agent) }, session)
	return just, err
}

// stateRollups keeps a session's rollups in its state directory.
type stateRollups struct{ s *State }

func (s *State) rollupPath(session string) string {
	return filepath.Join(s.session(session), "rollups.json")
}

func (r stateRollups) Rollups(session string) []rollup.Rollup {
	b, err := r.s.read(r.s.rollupPath(session))
	if err != nil {
		return nil
	}
	var rs []rollup.Rollup
	if json.Unmarshal(b, &rs) != nil {
		return nil
	}
	return rs
}

func (r stateRollups) PutRollups(session string, rs []rollup.Rollup) error {
	b, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	return r.s.write(r.s.rollupPath(session), b)
}
