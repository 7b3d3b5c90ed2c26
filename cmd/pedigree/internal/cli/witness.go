package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree/internal/witness"
	"github.com/pedigree-ai/pedigree/registry"
)

func newWitnessCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "An HTTP witness of pedigree logs, to keep their checkpoints on another host",
		Long: `A witness keeps the latest checkpoint of each log it is given, outside the log's
host, and takes a new one only if it extends it (a consistency proof from the size it
holds): a log cut back or rewritten before the witnessed size cannot be witnessed again,
and 'pedigree verify' names it. The protocol is that of C2SP's tlog-witness
(POST /add-checkpoint; 409 with the size it holds on a conflict), with pedigree's
checkpoints; GET /checkpoint/<log ID>?challenge=<hex> returns what it holds, signed with
the witness's key over the challenge, so that no one on the way answers for it.

A store hands its checkpoints to the witness when PEDIGREE_WITNESS_URL (the witness's
URL) and PEDIGREE_WITNESS_KEY (its public key, KEY.pub) are set, beside the file witness
in the keys directory: every 64 log leaves, every 5 seconds, at close and at once after
an approval's use.`,
		Args: noArgs,
	}
	cmd.AddCommand(newWitnessServe(a))
	return cmd
}

func newWitnessServe(a *app) *cobra.Command {
	var addr, keyFile, state, name string
	var logKeys []string
	cmd := &cobra.Command{
		Use:   "serve --key FILE --state FILE [--log-key FILE.pub ...] [--addr HOST:PORT] [--name NAME]",
		Short: "Serve an HTTP witness (prints its URL, runs until stopped)",
		Long: `Serve an HTTP witness of the logs whose engine keys are given with --log-key (the
public half, PEM: 'pedigree registry list -o json' shows engine:local's), by default
the engine key of --dir in the keys directory. --key is the witness's own key (made
at first start, mode 0600, with KEY.pub beside it: give KEY.pub to the stores as
PEDIGREE_WITNESS_KEY). --state is where it keeps each log's latest checkpoint (mode
0600, replaced safely). It prints its URL on the first line of its output.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyFile == "" || state == "" {
				return usagef("witness serve needs --key and --state")
			}
			key, err := witnessKey(keyFile)
			if err != nil {
				return err
			}
			var logs []ed25519.PublicKey
			for _, f := range logKeys {
				k, err := registry.LoadPublicKey(f)
				if err != nil {
					return fmt.Errorf("--log-key %s: %w", f, err)
				}
				logs = append(logs, k)
			}
			if len(logs) == 0 {
				ek, err := registry.LoadSigner(a.engineKeyFile())
				if err != nil {
					return fmt.Errorf("no --log-key, and the engine key of %s: %w", a.dir, err)
				}
				k, err := ek.Ed25519()
				if err != nil {
					return err
				}
				logs = append(logs, k)
			}
			s, err := witness.New(name, key, state, logs)
			if err != nil {
				return usagef("%v", err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := witness.HTTPServer(s)
			fmt.Fprintf(a.out, "http://%s\n", ln.Addr())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return err
			case <-cmd.Context().Done():
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return srv.Shutdown(ctx)
			}
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "where to listen (HOST:PORT; port 0: a free one)")
	cmd.Flags().StringVar(&keyFile, "key", "", "the witness's private key (made at first start, mode 0600, with FILE.pub)")
	cmd.Flags().StringVar(&state, "state", "", "the file where the witness keeps each log's latest checkpoint")
	cmd.Flags().StringArrayVar(&logKeys, "log-key", nil, "the public key (PEM) of a log's engine key it witnesses (repeatable; default: --dir's engine key)")
	cmd.Flags().StringVar(&name, "name", "pedigree-witness", "the witness's name in its cosignatures")
	return cmd
}

// witnessKey loads the witness's key, or makes it (with its .pub) when
// the file does not exist.
func witnessKey(path string) (*registry.Signer, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		s, priv, err := registry.GenerateSigner(nil)
		if err != nil {
			return nil, err
		}
		if err := registry.WritePrivateKeyFile(path, priv); err != nil {
			return nil, err
		}
		pub, _ := s.Ed25519()
		if err := registry.WritePublicKeyFile(strings.TrimSuffix(path, ".key")+".pub", pub); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := privateFile(path); err != nil {
		return nil, err
	}
	return registry.LoadSigner(path)
}
