package cli

import (
	"context"
	"path/filepath"

	"github.com/spf13/cobra"

	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"os"
	"strings"
)

// fleetFlags are serve's flags for joining a fleet.
type fleetFlags struct {
	url      string
	replicas int
	stream   string
	creds    string
	engine   string
	ca       string
	cert     string
	key      string
}

func (f *fleetFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "nats", "", `join the fleet on these NATS servers (comma-separated URLs), or "embedded" for a one-server trial in DIR/nats`)
	cmd.Flags().IntVar(&f.replicas, "nats-replicas", fleet.DefaultReplicas, "replicas of the fleet's stream (embedded: 1)")
	cmd.Flags().StringVar(&f.stream, "nats-stream", fleet.DefaultStream, "name of the fleet's stream")
	cmd.Flags().StringVar(&f.engine, "engine-key", "", "this node's engine key, which signs every record it publishes (default: the keys directory's, made by init); its public half must be registered as engine:<node> in the fleet's frozen registry")
	cmd.Flags().StringVar(&f.ca, "nats-ca", "", "TLS only: the PEM file of the authorities the NATS servers' certificates must chain to")
	cmd.Flags().StringVar(&f.cert, "nats-cert", "", "this node's TLS client certificate (PEM), for servers that verify their clients (with --nats-key)")
	cmd.Flags().StringVar(&f.key, "nats-key", "", "the key of --nats-cert (PEM, mode 0600)")
	cmd.Flags().StringVar(&f.creds, "nats-creds", "", "a NATS credentials file (JWT and nkey seed, mode 0600) that authenticates this node to the fleet's servers")
}

// join opens the data directory as a fleet node; with "embedded" it first
// starts the one-server NATS, and returns its stop.
func (f *fleetFlags) join(ctx context.Context, a *app, opts []pedigree.Option) (*pedigree.Engine, func(), error) {
	o := pedigree.FleetOptions{NATS: f.url, Replicas: f.replicas, Stream: f.stream, Name: filepath.Base(a.dir), Witness: a.fleetWitnessFile()}
	// The fleet's genesis is checked against --trust-root (the operator's
	// public key; required for an empty directory).
	tr, err := a.trustRootOption()
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, tr...)
	// The node's engine key signs every record it publishes; its peers
	// refuse what no engine key of the frozen registry signed.
	ek := f.engine
	if ek == "" {
		ek = a.engineKeyFile()
	} else if err := privateFile(ek); err != nil {
		return nil, nil, err
	}
	opts = append(opts, pedigree.WithEngineKeyFile(ek))
	if f.replicas < 1 || f.replicas > 5 {
		return nil, nil, usagef("--nats-replicas %d: 1 to 5", f.replicas)
	}
	if f.creds != "" {
		if f.url == "embedded" {
			return nil, nil, usagef("--nats-creds is for external servers: the embedded one makes its own credentials")
		}
		if err := privateFile(f.creds); err != nil {
			return nil, nil, err
		}
		o.NATSCreds = f.creds
	}
	if (f.cert == "") != (f.key == "") {
		return nil, nil, usagef("--nats-cert and --nats-key go together")
	}
	if f.ca != "" || f.cert != "" {
		if f.url == "embedded" {
			return nil, nil, usagef("--nats-ca, --nats-cert and --nats-key are for external servers: the embedded one listens on loopback")
		}
		if f.key != "" {
			if err := privateFile(f.key); err != nil {
				return nil, nil, err
			}
		}
		o.NATSCA, o.NATSCert, o.NATSKey = f.ca, f.cert, f.key
	}
	var stop func()
	if f.url == "embedded" {
		user, pass, err := a.embeddedNATSCredentials()
		if err != nil {
			return nil, nil, err
		}
		s, err := fleet.StartServer(fleet.ServerOptions{Name: "pedigree", Dir: filepath.Join(a.dir, "nats"), User: user, Password: pass})
		if err != nil {
			return nil, nil, err
		}
		stop = s.Shutdown
		o.NATS, o.Replicas, o.PinServers = s.URL(), 1, true
		o.NATSUser, o.NATSPassword = user, pass
	}
	opts = append([]pedigree.Option{pedigree.WithClock(a.clock)}, opts...)
	e, err := pedigree.JoinFleet(ctx, a.dir, o, opts...)
	if err != nil && stop != nil {
		stop()
		stop = nil
	}
	return e, stop, err
}

// fleetWitnessFile is where a fleet node keeps the latest fleet
// checkpoint it verified (fleet-witness-<h>.json in the keys directory,
// outside the data directory); "" without a keys directory.
func (a *app) fleetWitnessFile() string {
	w := a.witnessFile()
	if w == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(w), "fleet-"+filepath.Base(w))
}

// natsCredentials is the embedded NATS server's only account.
type natsCredentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// embeddedNATSCredentials are the user and password of the embedded NATS
// server: made at its first start in the keys directory (nats-<h>.json,
// mode 0600, outside the data directory), read at every later one. The
// server takes no other client, so a local user who cannot read the keys
// directory can neither read the fleet's stream nor write to it.
func (a *app) embeddedNATSCredentials() (string, string, error) {
	d, err := a.keysDir()
	if err != nil {
		return "", "", fmt.Errorf("--nats embedded keeps its credentials in the keys directory: %w", err)
	}
	name, err := pedigree.KeyFileName(a.dir)
	if err != nil {
		return "", "", err
	}
	file := "nats-" + strings.TrimSuffix(strings.TrimPrefix(name, "operator-"), ".key") + ".json"
	path := filepath.Join(d, file)
	b, err := safefile.ReadFile(d, file, 4096)
	if errors.Is(err, os.ErrNotExist) {
		var r [32]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", "", err
		}
		c := natsCredentials{User: "pedigree", Password: hex.EncodeToString(r[:])}
		b, _ = json.Marshal(c)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
		if err := safefile.Create(d, file, b, 0o600); err != nil {
			return "", "", err
		}
		return c.User, c.Password, nil
	}
	if err != nil {
		return "", "", err
	}
	if err := privateFile(path); err != nil {
		return "", "", err
	}
	var c natsCredentials
	if err := json.Unmarshal(b, &c); err != nil || c.User == "" || len(c.Password) < 32 {
		return "", "", fmt.Errorf("%s: not the embedded NATS server's credentials", path)
	}
	return c.User, c.Password, nil
}

// privateFile refuses a credentials file its group or others may read or
// write, as ssh does with keys.
func privateFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is mode %#o: a credentials file must be readable by its owner only (chmod 600)", path, fi.Mode().Perm())
	}
	return nil
}
