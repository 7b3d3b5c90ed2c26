package cli

import (
	"context"
	"crypto/ed25519"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/registry"
)

// fleetFlags are serve's flags for joining a fleet.
type fleetFlags struct {
	url       string
	replicas  int
	trustRoot string
	stream    string
}

func (f *fleetFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "nats", "", `join the fleet on these NATS servers (comma-separated URLs), or "embedded" for a one-server trial in DIR/nats`)
	cmd.Flags().IntVar(&f.replicas, "nats-replicas", fleet.DefaultReplicas, "replicas of the fleet's stream (embedded: 1)")
	cmd.Flags().StringVar(&f.stream, "nats-stream", fleet.DefaultStream, "name of the fleet's stream")
	cmd.Flags().StringVar(&f.trustRoot, "fleet-trust-root", "", "the operator public key (PEM) the fleet's registry must be frozen by (required for an empty directory)")
}

// join opens the data directory as a fleet node; with "embedded" it first
// starts the one-server NATS, and returns its stop.
func (f *fleetFlags) join(ctx context.Context, a *app, opts []pedigree.Option) (*pedigree.Engine, func(), error) {
	o := pedigree.FleetOptions{NATS: f.url, Replicas: f.replicas, Stream: f.stream, Name: filepath.Base(a.dir)}
	if f.trustRoot != "" {
		var err error
		var pub ed25519.PublicKey
		if pub, err = registry.LoadPublicKey(f.trustRoot); err != nil {
			return nil, nil, usagef("--fleet-trust-root: %v", err)
		}
		o.TrustRoot = pub
	}
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
