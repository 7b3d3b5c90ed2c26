package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
)

func newLogCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "The tamper-evident log: signed checkpoints, inclusion and consistency proofs",
		Long: `Every entry and every gate decision is appended, in order, to an RFC 6962 Merkle
log in the same transaction that stores it. A checkpoint is the log's size and root
hash, signed by the operator key. An inclusion proof shows that an entry or decision
is in the tree of a checkpoint; a consistency proof shows that an older checkpoint's
tree is a prefix of a newer one's, so nothing logged before it was changed. Keep
checkpoints somewhere the data directory's host cannot rewrite. 'pedigree verify'
checks the log as well.`,
		Args: noArgs,
	}
	cmd.AddCommand(newLogCheckpoint(a), newLogProve(a), newLogConsistency(a))
	return cmd
}

func newLogCheckpoint(a *app) *cobra.Command {
	var opKey string
	cmd := &cobra.Command{
		Use:   "checkpoint [--operator-key FILE]",
		Short: "Sign the log's current size and root with the operator key",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opKey == "" {
				opKey = filepath.Join(a.dir, pedigree.OperatorKeyFile)
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			op, err := registry.LoadSigner(opKey)
			if err != nil {
				return err
			}
			cp, err := e.Checkpoint(cmd.Context(), op)
			if err != nil {
				return err
			}
			return a.print(checkpointOutput{v: v1, Checkpoint: cp}, func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint %d: root %s\nsigned at %s: %s\n", cp.Size, cp.Root, cp.Time, cp.Signature)
			})
		},
	}
	cmd.Flags().StringVar(&opKey, "operator-key", "", "operator private key (default DIR/operator.key)")
	return cmd
}

func newLogProve(a *app) *cobra.Command {
	var size uint64
	cmd := &cobra.Command{
		Use:   "prove ID [--checkpoint SIZE]",
		Short: "An inclusion proof of an entry or decision against a checkpoint",
		Long: `Build an inclusion proof for an entry or a decision (ID, or a unique prefix of an
entry ID) against a checkpoint (default: the latest), verify it, and print it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			p, err := e.Prove(cmd.Context(), args[0], size)
			if err != nil {
				return err
			}
			return a.print(proofOutput{v: v1, Verified: true, Proof: p}, func(w io.Writer) {
				fmt.Fprintf(w, "%s %s is leaf %d of checkpoint %d (root %s): verified\n", p.Kind, p.ID, p.Index, p.Checkpoint.Size, short(p.Checkpoint.Root))
				for _, h := range p.Hashes {
					fmt.Fprintf(w, "  %s\n", h)
				}
			})
		},
	}
	cmd.Flags().Uint64Var(&size, "checkpoint", 0, "the checkpoint's size (default: the latest)")
	return cmd
}

func newLogConsistency(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "consistency OLD NEW",
		Short: "A consistency proof between two checkpoints (by size)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sizes [2]uint64
			for i, s := range args {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return usagef("checkpoint sizes are whole numbers, not %q", s)
				}
				sizes[i] = n
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			p, err := e.Consistency(cmd.Context(), sizes[0], sizes[1])
			if err != nil {
				return err
			}
			return a.print(proofOutput{v: v1, Verified: true, Proof: p}, func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint %d (root %s) is a prefix of checkpoint %d (root %s): verified\n",
					p.Old.Size, short(p.Old.Root), p.New.Size, short(p.New.Root))
				for _, h := range p.Hashes {
					fmt.Fprintf(w, "  %s\n", h)
				}
			})
		},
	}
}
