package cli

import (
	"context"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/fleet"
)

// fleetFlags are serve's flags for joining a fleet.
type fleetFlags struct {
	url      string
	replicas int
	stream   string
}

func (f *fleetFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "nats", "", `join the fleet on these NATS servers (comma-separated URLs), or "embedded" for a one-server trial in DIR/nats`)
	cmd.Flags().IntVar(&f.replicas, "nats-replicas", fleet.DefaultReplicas, "replicas of the fleet's stream (embedded: 1)")
	cmd.Flags().StringVar(&f.stream, "nats-stream", fleet.DefaultStream, "name of the fleet's stream")
}

// join opens the data directory as a fleet node; with "embedded" it first
// starts the one-server NATS, and returns its stop.
func (f *fleetFlags) join(ctx context.Context, a *app, opts []pedigree.Option) (*pedigree.Engine, func(), error) {
	o := pedigree.FleetOptions{NATS: f.url, Replicas: f.replicas, Stream: f.stream, Name: filepath.Base(a.dir)}
	// The fleet's genesis is checked against --trust-root (the operator's
	// public key; required for an empty directory).
	tr, err := a.trustRootOption()
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, tr...)
	if f.replicas < 1 || f.replicas > 5 {
		return nil, nil, usagef("--nats-replicas %d: 1 to 5", f.replicas)
	}
	var stop func()
	if f.url == "embedded" {
		s, err := fleet.StartServer(fleet.ServerOptions{Name: "pedigree", Dir: filepath.Join(a.dir, "nats")})
		if err != nil {
			return nil, nil, err
		}
		stop = s.Shutdown
		o.NATS, o.Replicas, o.PinServers = s.URL(), 1, true
	}
	opts = append([]pedigree.Option{pedigree.WithClock(a.clock)}, opts...)
	e, err := pedigree.JoinFleet(ctx, a.dir, o, opts...)
	if err != nil && stop != nil {
		stop()
		stop = nil
	}
	return e, stop, err
}
