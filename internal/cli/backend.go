package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/server"
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
		b = e
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
