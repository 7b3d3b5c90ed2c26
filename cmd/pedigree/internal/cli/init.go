package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
	"os"
)

func newInitCommand(a *app) *cobra.Command {
	var tau float64
	var opKey string
	var maxTTL time.Duration
	cmd := &cobra.Command{
		Use:   "init [--tau 0.5] [--operator-key FILE] [--max-approval-ttl 24h]",
		Short: "Create the data directory, the store and the operator key",
		Long: `Create the data directory and the store, and a new operator key, which signs the
registry freeze and the log's checkpoints. The key is written outside the data
directory: to --operator-key FILE, else to the keys directory ($PEDIGREE_KEYS, else
$XDG_CONFIG_HOME/pedigree/keys, else $HOME/.config/pedigree/keys, made mode 0700) as
operator-<h>.key, h the first 16 hex characters of the sha256 of the data
directory's absolute path. Beside it, operator-<h>.pub is its public half: the trust
root that every verb pins by default (see --trust-root), so that a store whose
registry was rebuilt by someone who can write the directory is refused.

init also makes the engine key, engine-<h>.key in the keys directory (beside the
data directory when there is no keys directory), registered as the principal
engine:local: every verb that writes signs each record it logs with it, and hands
a signed checkpoint to the witness file witness-<h>.json there. Unlike the
operator key it stays on the host; without it the store can be read and verified,
not written.

tau is the strong-edge threshold: an edge of weight >= tau carries taint.
--max-approval-ttl caps how long any approval stays usable. Both are stored with
the registry and frozen with it. init refuses a directory that already holds a
store, and never overwrites a key.

With --operator-key hashivault://NAME (a KMS key reference, see docs/keys.md) the
operator key is the KMS's Ed25519 key: nothing private is written, its public half
is written as the trust root (operator-<h>.pub), and freeze, seal and checkpoint
take the same reference (--operator-key, or $PEDIGREE_OPERATOR_KEY).

Example:
  pedigree init --tau 0.5
  pedigree init --operator-key /media/usb/pedigree-operator.key`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.refuseIfServed(cmd.Context(), "initialise it again"); err != nil {
				return err
			}
			if maxTTL <= 0 {
				return usagef("--max-approval-ttl must be positive")
			}
			if err := registry.ValidateTau(tau); err != nil {
				return usageError{fmt.Errorf("--tau: %w", err)}
			}
			if registry.IsKMSRef(opKey) {
				return a.initKMS(cmd, opKey, tau, maxTTL)
			}
			key := opKey
			if key == "" {
				var err error
				if key, err = a.defaultOperatorKey(); err != nil {
					return err
				}
				if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil { // the keys directory, as its owner named it
					return fmt.Errorf("keys directory: %w", err)
				}
			}
			ek := a.engineKeyFile()
			if err := os.MkdirAll(filepath.Dir(ek), 0o700); err != nil {
				return fmt.Errorf("keys directory: %w", err)
			}
			e, err := pedigree.Init(cmd.Context(), a.dir, tau, pedigree.WithClock(a.clock),
				pedigree.WithOperatorKeyFile(key), pedigree.WithEngineKeyFile(ek), pedigree.WithMaxApprovalTTL(maxTTL))
			if err != nil {
				return err
			}
			defer e.Close()
			pub := pedigree.TrustRootPath(key)
			pk, err := registry.LoadPublicKey(pub)
			if err != nil {
				return err
			}
			out := initOutput{v: v1, Dir: a.dir, Tau: tau, MaxApprovalTTL: maxTTL.String(), OperatorKey: key, TrustRoot: pub,
				OperatorKeySHA256: registry.KeyFingerprint(pk)}
			return a.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "initialised %s (tau %v, approvals at most %s)\n", a.dir, tau, maxTTL)
				fmt.Fprintf(w, "operator key: %s (it freezes the registry and signs checkpoints: keep it off this host after freeze)\n", key)
				fmt.Fprintf(w, "trust root:   %s (the operator public key; keep a copy where the data directory's host cannot write)\n", pub)
			})
		},
	}
	cmd.Flags().Float64Var(&tau, "tau", pedigree.DefaultTau, "strong-edge threshold, in (0, 1]")
	cmd.Flags().StringVar(&opKey, "operator-key", "", "write the operator private key here (default: the keys directory's operator-<h>.key); or a KMS key reference (hashivault://NAME) holding an Ed25519 key, which is used and never leaves the KMS")
	cmd.Flags().DurationVar(&maxTTL, "max-approval-ttl", registry.DefaultMaxApprovalTTL, "the longest any approval may stay usable")
	return cmd
}

// initKMS is init with the operator key held by a KMS: the store is made
// with that key, and its public half is written as the trust root.
func (a *app) initKMS(cmd *cobra.Command, ref string, tau float64, maxTTL time.Duration) error {
	op, err := registry.OpenSigner(cmd.Context(), ref, a.kmsTimeout())
	if err != nil {
		return fmt.Errorf("--operator-key %s: %w", registry.DisplayRef(ref), err)
	}
	opPub, err := op.Ed25519()
	if err != nil {
		return fmt.Errorf("--operator-key %s: %w", registry.DisplayRef(ref), err)
	}
	key, err := a.defaultOperatorKey()
	if err != nil {
		return err
	}
	pub := pedigree.TrustRootPath(key)
	ek := a.engineKeyFile()
	for _, d := range []string{filepath.Dir(pub), filepath.Dir(ek)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("keys directory: %w", err)
		}
	}
	if err := registry.WritePublicKeyFile(pub, opPub); err != nil {
		return err
	}
	e, err := pedigree.Init(cmd.Context(), a.dir, tau, pedigree.WithClock(a.clock),
		pedigree.WithOperatorSigner(op), pedigree.WithEngineKeyFile(ek), pedigree.WithMaxApprovalTTL(maxTTL))
	if err != nil {
		safefile.Remove(filepath.Dir(pub), filepath.Base(pub), safefile.Regular) // nothing half-made
		return err
	}
	defer e.Close()
	out := initOutput{v: v1, Dir: a.dir, Tau: tau, MaxApprovalTTL: maxTTL.String(), OperatorKey: registry.DisplayRef(ref), TrustRoot: pub,
		OperatorKeySHA256: registry.KeyFingerprint(opPub)}
	return a.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "initialised %s (tau %v, approvals at most %s)\n", a.dir, tau, maxTTL)
		fmt.Fprintf(w, "operator key: %s (held by the KMS; pass it as --operator-key or $PEDIGREE_OPERATOR_KEY to freeze, seal and checkpoint)\n", registry.DisplayRef(ref))
		fmt.Fprintf(w, "trust root:   %s (the operator public key; keep a copy where the data directory's host cannot write)\n", pub)
	})
}
