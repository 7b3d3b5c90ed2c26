package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/tlog"
	"slices"
)

func newVerifyCommand(a *app) *cobra.Command {
	var cpFiles, witnesses []string
	cmd := &cobra.Command{
		Use:   "verify [--checkpoint FILE]... [--witness FILE]...",
		Short: "Verify the whole store: signatures, IDs, edges, labels, the log, the registry freeze",
		Long: `Walk the whole store: each entry's signature against the frozen registry, each ID
against its bytes, each parent link in both directions, each stored label against a
recomputation, and the log over entries and decisions against every stored
checkpoint. Exit 0 when clean, 3 with the list of what is wrong, 1 when it could
not check. A registry changed since freeze is caught when the store is opened; a
registry rebuilt by someone who can write the directory is caught only against a
trust root pinned outside it (--trust-root): verify says which root, if any, is
pinned.

--checkpoint FILE takes a checkpoint kept elsewhere (the JSON that 'pedigree log
checkpoint -o json' printed): verify fails when the store is behind it (an old copy
restored, or leaves deleted), when its log is not an extension of it, or when it is
not signed by the store's operator key.

--witness FILE is a file witness the engine handed its own signed checkpoints to (every
64 leaves or 5 seconds, at close, and after each approval's use; the CLI keeps one in
the keys directory and always checks it): verify names any leaf deleted, reordered or
rewritten before the witnessed size, and reports the unwitnessed tail after it.

Example:
  pedigree log checkpoint -o json > /media/usb/checkpoint.json
  pedigree verify --checkpoint /media/usb/checkpoint.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cps, err := readCheckpointFiles(append(slices.Clone(cpFiles), witnesses...))
			if err != nil {
				return err
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			r, err := logOf(e).VerifyCheckpoints(cmd.Context(), cps)
			if err != nil {
				return err
			}
			// A server opened without a root was held to this command's
			// root when it was reached (checkServedRoot).
			if r.TrustRoot == pedigree.TrustRootNone {
				if kind, err := a.pinnedKind(); err != nil {
					return err
				} else if kind != "" {
					r.TrustRoot = kind
				}
			}
			out := verifyOutput{v: v1, OK: r.OK(), Entries: r.Entries, Problems: r.Problems, TrustRoot: r.TrustRoot, Checkpoints: len(cps),
				LogSize: r.LogSize, Witnessed: r.Witnessed, Unwitnessed: r.LogSize - min(r.Witnessed, r.LogSize)}
			err = a.print(out, func(w io.Writer) {
				if r.OK() {
					fmt.Fprintf(w, "ok: %d entries verified\n", r.Entries)
				} else {
					fmt.Fprintf(w, "TAMPERED: %d problems in %d entries\n", len(r.Problems), r.Entries)
					for _, p := range r.Problems {
						fmt.Fprintf(w, "  %s  %s\n", short(p.ID), line(w, p.What))
					}
				}
				if len(cps) > 0 && r.OK() {
					fmt.Fprintf(w, "the store extends %d checkpoint(s) kept elsewhere\n", len(cps))
				}
				if r.Witnessed > 0 {
					fmt.Fprintf(w, "witnessed: %d of %d leaves; %d unwitnessed after\n", r.Witnessed, r.LogSize, out.Unwitnessed)
				}
				if r.TrustRoot == pedigree.TrustRootNone {
					fmt.Fprintln(w, "WARNING: no trust root is pinned: whoever can write the data directory can rebuild its registry unnoticed. Pin the operator public key or the freeze digest with --trust-root FILE or $PEDIGREE_TRUST_ROOT.")
				} else {
					fmt.Fprintf(w, "trust root: %s\n", r.TrustRoot)
				}
			})
			if err == nil && !r.OK() {
				return verdictError{ExitNegative, "verify found problems"}
			}
			return err
		},
	}
	cmd.Flags().StringArrayVar(&cpFiles, "checkpoint", nil, "a checkpoint kept elsewhere (JSON from 'log checkpoint -o json') the store must extend; repeatable")
	cmd.Flags().StringArrayVar(&witnesses, "witness", nil, "a file witness of the engine's checkpoints the store must extend; repeatable")
	return cmd
}

func readCheckpointFile(path string) (*tlog.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cp, err := tlog.ParseCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cp, nil
}

func readCheckpointFiles(paths []string) ([]tlog.Checkpoint, error) {
	var out []tlog.Checkpoint
	for _, p := range paths {
		cp, err := readCheckpointFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, *cp)
	}
	return out, nil
}
