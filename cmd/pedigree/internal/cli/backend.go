package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
)

// errServed refuses what a running server does not serve.
var errServed = errors.New("a pedigree server is running on this data directory")

// backend connects to the directory's server when one runs, else opens the
// store: both are a pedigree.Backend, so output and exit codes do not depend
// on which. Options that configure an engine (another policy or catalog)
// cannot reach a running server: they are refused rather than silently
// ignored.
//
// While another process holds the directory, it waits up to --lock-wait,
// looking for a server each time: a server that is starting holds the
// directory a moment before its socket answers.
func (a *app) backend(ctx context.Context, opts ...pedigree.Option) (b pedigree.Backend, err error) {
	err = a.waitForDirectory(ctx, func() error {
		c, err := server.Dial(ctx, a.dir, a.clock)
		if err != nil && !errors.Is(err, server.ErrNoServer) {
			return err // serve.json names a server that cannot be trusted: never fall back silently
		}
		if err == nil {
			if len(opts) > 0 {
				c.Close()
				return usagef("%v: --policies and --tools apply to 'pedigree serve', not to a client", errServed)
			}
			if err := a.checkServedRoot(ctx, c); err != nil {
				c.Close()
				return err
			}
			b = c
			return nil
		}
		e, err := a.openOnce(ctx, opts...)
		if err != nil {
			return err
		}
		b = e
		return nil
	})
	return b, err
}

// refuseIfServed stops the verbs a server does not serve (init, registry
// changes): they need the store itself.
//
// A server the hook started on demand is stopped instead: it holds the
// store for the hook's speed alone, and the next event starts another.
func (a *app) refuseIfServed(ctx context.Context, verb string) error {
	err := server.StopOnDemand(ctx, a.dir, a.clock)
	if err == nil || errors.Is(err, server.ErrNoServer) {
		return nil
	}
	if !errors.Is(err, server.ErrNotOnDemand) {
		return err
	}
	return fmt.Errorf("%w: stop it to %s (registry changes are never served, and impossible after freeze)", errServed, verb)
}

// checkServedRoot holds a running server to the trust root this command
// pins: the registry it reports must match, as a store opened here would.
// (That the server holds this directory at all is the socket's and the
// server's credential's business.)
func (a *app) checkServedRoot(ctx context.Context, b pedigree.Backend) error {
	f, err := a.trustRootFile()
	if err != nil || f == "" {
		return err
	}
	root, err := pedigree.ReadTrustRoot(f)
	if err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	view, err := b.Registry(ctx)
	if err != nil {
		return err
	}
	return root.Matches(view)
}

// openStore opens the store itself for a verb that a running server does
// not serve (registry changes, the gateway's and the hook's bootstrap):
// refused while one runs, so that the two never disagree about the
// directory.
//
// While it takes the directory, the hook starts no server (holdServers),
// and one started before is stopped at each attempt.
func (a *app) openStore(ctx context.Context, verb string) (e *pedigree.Engine, err error) {
	// Once this process holds the store, a server started on demand finds
	// it held and stops at once; until then, none is started.
	release := a.holdServers()
	defer release()
	err = a.waitForDirectory(ctx, func() error {
		if err := a.refuseIfServed(ctx, verb); err != nil {
			return err
		}
		e, err = a.openOnce(ctx)
		return err
	})
	return e, err
}

// logOf is the log's proofs and checkpoints of a backend: an engine's Log,
// or the server's client itself (server.Client is a pedigree.Prover; the
// two are the only backends a.backend returns).
func logOf(b pedigree.Backend) pedigree.Prover {
	if e, ok := b.(*pedigree.Engine); ok {
		return e.Log()
	}
	return b.(pedigree.Prover)
}
