package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// backend is what the verbs need of a data directory. When a `pedigree
// serve` runs on the directory (it holds Badger's lock), the verbs talk to
// it over its socket; otherwise they open the store. Both give the same
// results and errors, so output and exit codes do not depend on which.
type backend interface {
	Registry(ctx context.Context) (frozen bool, tau float64, ps []registry.Principal, err error)
	Resolve(ctx context.Context, prefix string) (string, error)
	Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, []lineage.Edge, error)
	Recall(ctx context.Context, session string, ids []string) error
	Check(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, error)
	Approve(ctx context.Context, s *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error)
	Decisions(ctx context.Context, limit int) ([]gate.Decision, error)
	Show(ctx context.Context, id string) (*server.EntryView, error)
	Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error)
	Verify(ctx context.Context) (*lineage.Report, error)
	Trajectory(ctx context.Context, session string) (*trajectory.State, error)
	Checkpoint(ctx context.Context, operator *registry.Signer) (*lineage.Checkpoint, error)
	Prove(ctx context.Context, id string, size uint64) (*lineage.InclusionProof, error)
	Consistency(ctx context.Context, oldSize, newSize uint64) (*lineage.ConsistencyProof, error)
	Close() error
}

// errServed refuses what a running server does not serve.
var errServed = errors.New("a pedigree server is running on this data directory")

// backend connects to the directory's server when one runs, else opens the
// store. Options that configure an engine (another policy or catalog) cannot
// reach a running server: they are refused rather than silently ignored.
//
// While another process holds the directory, it waits up to --lock-wait,
// looking for a server each time: a server that is starting holds the
// directory a moment before its socket answers.
func (a *app) backend(ctx context.Context, opts ...pedigree.Option) (b backend, err error) {
	err = a.waitForDirectory(ctx, func() error {
		c, err := server.Dial(ctx, a.dir, a.clock)
		if err == nil {
			if len(opts) > 0 {
				c.Close()
				return usagef("%v: --policies and --tools apply to 'pedigree serve', not to a client", errServed)
			}
			b = c
			return nil
		}
		e, err := a.openOnce(ctx, opts...)
		if err != nil {
			return err
		}
		b = local{e}
		return nil
	})
	return b, err
}

// refuseIfServed stops the verbs a server does not serve (init, registry
// changes): they need the store itself.
func (a *app) refuseIfServed(ctx context.Context, verb string) error {
	c, err := server.Dial(ctx, a.dir, a.clock)
	if err != nil {
		return nil
	}
	c.Close()
	return fmt.Errorf("%w: stop it to %s (registry changes are never served, and impossible after freeze)", errServed, verb)
}

// local is the engine itself.
type local struct{ e *pedigree.Engine }

func (l local) Registry(context.Context) (bool, float64, []registry.Principal, error) {
	r := l.e.Registry()
	return r.Frozen(), r.Tau(), r.List(), nil
}
func (l local) Resolve(_ context.Context, prefix string) (string, error) { return l.e.Resolve(prefix) }
func (l local) Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, []lineage.Edge, error) {
	n, err := l.e.Record(ctx, s, en)
	if err != nil {
		return nil, nil, err
	}
	return n, l.e.Graph().Edges(n), nil
}
func (l local) Recall(ctx context.Context, session string, ids []string) error {
	return l.e.Recall(ctx, session, ids)
}
func (l local) Check(ctx context.Context, s *registry.Signer, c pedigree.Call) (*gate.Decision, error) {
	return l.e.Check(ctx, s, c)
}
func (l local) Approve(ctx context.Context, s *registry.Signer, approver, id string, ttl time.Duration) (*lineage.Node, error) {
	return l.e.Approve(ctx, s, approver, id, ttl)
}
func (l local) Decisions(ctx context.Context, limit int) ([]gate.Decision, error) {
	return l.e.Gate().Decisions(ctx, limit)
}
func (l local) Show(_ context.Context, id string) (*server.EntryView, error) {
	return server.ShowLocal(l.e, id)
}
func (l local) Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error) {
	return l.e.Trace(ctx, id, o)
}
func (l local) Verify(ctx context.Context) (*lineage.Report, error) { return l.e.Verify(ctx) }
func (l local) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	return l.e.Gate().TrajectoryLog(ctx, session)
}
func (l local) Checkpoint(ctx context.Context, op *registry.Signer) (*lineage.Checkpoint, error) {
	return l.e.Checkpoint(ctx, op)
}
func (l local) Prove(_ context.Context, id string, size uint64) (*lineage.InclusionProof, error) {
	return server.ProveLocal(l.e, id, size)
}
func (l local) Consistency(_ context.Context, o, n uint64) (*lineage.ConsistencyProof, error) {
	return l.e.Graph().Consistency(o, n)
}
func (l local) Close() error { return l.e.Close() }
