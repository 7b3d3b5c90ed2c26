package hook

import (
	"context"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// EngineBackend is the engine itself as a Backend (the sidecar's route).
// It goes away when the engine implements pedigree.Backend.
func EngineBackend(e *pedigree.Engine) Backend { return engine{e} }

type engine struct{ e *pedigree.Engine }

func (l engine) Registry(context.Context) (bool, float64, []registry.Principal, error) {
	r := l.e.Registry()
	return r.Frozen(), r.Tau(), r.List(), nil
}
func (l engine) Context(ctx context.Context, session string) ([]string, error) {
	return l.e.Graph().Context(ctx, session)
}
func (l engine) Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, []lineage.Edge, error) {
	n, err := l.e.Record(ctx, s, en)
	if err != nil {
		return nil, nil, err
	}
	return n, l.e.Graph().Edges(n), nil
}
func (l engine) Check(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, error) {
	return l.e.Check(ctx, s, c)
}
func (l engine) Approve(ctx context.Context, s *registry.Signer, approver, id string, ttl time.Duration) (*lineage.Node, error) {
	return l.e.Approve(ctx, s, approver, id, ttl)
}
func (l engine) Decision(_ context.Context, id string) (*gate.Decision, error) {
	return l.e.Gate().Decision(id)
}
