package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree/tlog"
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
	cmd.AddCommand(newLogHead(a), newLogCheckpoint(a), newLogProve(a), newLogConsistency(a), newLogRefusals(a))
	return cmd
}

func newLogHead(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "head",
		Short: "The log's current size and root, unsigned: no key needed",
		Long: `Print the log's current size (its leaves: entries and decisions) and root hash,
as the store holds them now, without signing anything: what a monitor or an auditor
without the operator key reads. 'pedigree log checkpoint' signs the same head.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			size, root, err := logOf(e).Head(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(headOutput{v: v1, Size: size, Root: root}, func(w io.Writer) {
				fmt.Fprintf(w, "size %d: root %s\n", size, root)
			})
		},
	}
}

func newLogCheckpoint(a *app) *cobra.Command {
	var opKey string
	cmd := &cobra.Command{
		Use:   "checkpoint [--operator-key FILE]",
		Short: "Sign the log's current size and root with the operator key",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			op, err := a.loadOperator(opKey)
			if err != nil {
				return err
			}
			cp, err := logOf(e).Checkpoint(cmd.Context(), op)
			if err != nil {
				return err
			}
			return a.print(checkpointOutput{v: v1, Checkpoint: cp}, func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint %d: root %s\nsigned at %s: %s\n", cp.Size, cp.Root, cp.Time, cp.Signature)
			})
		},
	}
	cmd.Flags().StringVar(&opKey, "operator-key", "", "operator private key: a file or a KMS key reference (default: $PEDIGREE_OPERATOR_KEY, else the keys directory's operator-<h>.key, as init wrote it)")
	return cmd
}

func newLogProve(a *app) *cobra.Command {
	var size uint64
	var cpFile string
	cmd := &cobra.Command{
		Use:   "prove ID [--checkpoint SIZE | --checkpoint-file FILE]",
		Short: "An inclusion proof of an entry or decision against a checkpoint",
		Long: `Build an inclusion proof for an entry or a decision (ID, or a unique prefix of an
entry ID) against a checkpoint (default: the latest stored), verify it, and print it.

--checkpoint-file FILE proves against a checkpoint kept elsewhere (the JSON that
'pedigree log checkpoint -o json' printed) instead of the store's own copy; exit 3
when the store is behind it or is not an extension of it.

Example:
  pedigree log prove 3f2a9c1e --checkpoint-file /media/usb/checkpoint.json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cpFile != "" && size != 0 {
				return usagef("give --checkpoint SIZE or --checkpoint-file FILE, not both")
			}
			var ext *tlog.Checkpoint
			if cpFile != "" {
				var err error
				if ext, err = readCheckpointFile(cpFile); err != nil {
					return err
				}
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			var p *tlog.InclusionProof
			if ext != nil {
				p, err = logOf(e).ProveAgainst(cmd.Context(), args[0], ext)
			} else {
				p, err = logOf(e).Prove(cmd.Context(), args[0], size)
			}
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
	cmd.Flags().StringVar(&cpFile, "checkpoint-file", "", "prove against this checkpoint kept elsewhere (JSON from 'log checkpoint -o json')")
	return cmd
}

func newLogConsistency(a *app) *cobra.Command {
	var cpFile string
	cmd := &cobra.Command{
		Use:   "consistency (OLD NEW | --checkpoint-file FILE [NEW])",
		Short: "A consistency proof between two checkpoints (by size)",
		Long: `Prove that the tree of checkpoint OLD is a prefix of checkpoint NEW's (both stored,
by size), and verify the proof.

--checkpoint-file FILE takes the old checkpoint from outside the store (the JSON
that 'pedigree log checkpoint -o json' printed), and proves the store's log extends
it, up to the stored checkpoint NEW or, without NEW, the log's current head; exit 3
when the store is behind it or is not an extension of it.

Example:
  pedigree log consistency 10 42
  pedigree log consistency --checkpoint-file /media/usb/checkpoint.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			want := 2
			if cpFile != "" {
				want = 1
				if len(args) == 0 {
					want = 0
				}
			}
			if len(args) != want {
				return usagef("want OLD NEW, or --checkpoint-file FILE [NEW]")
			}
			var sizes []uint64
			for _, s := range args {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return usagef("checkpoint sizes are whole numbers, not %q", s)
				}
				sizes = append(sizes, n)
			}
			var ext *tlog.Checkpoint
			if cpFile != "" {
				var err error
				if ext, err = readCheckpointFile(cpFile); err != nil {
					return err
				}
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			var p *tlog.ConsistencyProof
			if ext != nil {
				var n uint64
				if len(sizes) == 1 {
					n = sizes[0]
				}
				p, err = logOf(e).ConsistencyFrom(cmd.Context(), ext, n)
			} else {
				p, err = logOf(e).Consistency(cmd.Context(), sizes[0], sizes[1])
			}
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
	cmd.Flags().StringVar(&cpFile, "checkpoint-file", "", "the old checkpoint, kept elsewhere (JSON from 'log checkpoint -o json')")
	return cmd
}

func newLogRefusals(a *app) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "refusals [--limit N]",
		Short: "The refusal log: writes refused as attempts, oldest first",
		Long: `Every write refused for a reason an attacker would cause is logged: a forged
signature, an unknown principal, a key that is not the principal's, a registration
after freeze, a bad approval, a call entry the gate refused. Each row holds the
time, the principal the write claimed, the kind and reason, and the sha256 of the
payload (never the payload or a key). The log keeps the newest 10,000 rows; the
server counts refusals in pedigree_refused_writes_total.

Example:
  pedigree log refusals --limit 20
  pedigree log refusals -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must not be negative")
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			rs, err := e.Refusals(cmd.Context(), limit)
			if err != nil {
				return err
			}
			return a.print(refusalsOutput{v: v1, Refusals: rs}, func(w io.Writer) {
				if len(rs) == 0 {
					fmt.Fprintln(w, "no refused writes")
				}
				for _, r := range rs {
					fmt.Fprintf(w, "%s  %-17s %-24s payload %s  %s\n", r.Time, r.Kind, r.Principal, short(r.PayloadDigest), line(w, r.Reason))
				}
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "show only the last N (default: all kept)")
	return cmd
}
