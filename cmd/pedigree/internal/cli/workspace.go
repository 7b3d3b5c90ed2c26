package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/registry"
)

func newHookClaudeTrustWorkspace(a *app) *cobra.Command {
	var tier, opKey string
	var list bool
	cmd := &cobra.Command{
		Use:   "trust-workspace [DIR] [--tier user|internal] [--operator-key FILE] | --list",
		Short: "Vouch for a git repository as of its current commit (Claude Code's \"trust this folder\")",
		Long: `Declare the git repository that holds DIR (default: the current directory) trusted
as of its current commit (HEAD). When Claude Code reads a file of it, the content is
signed by the repository principal of --tier (user, or internal: the default) instead
of tool:claude-local (unverified), if and only if the file is tracked in that commit
with exactly that content: reading it does not taint the session, and the trace says
which declaration gave the tier.

Nothing else is vouched for: untracked files, ignored paths (node_modules, vendor,
build output), a file modified since, a commit pulled or merged later (declare again
to move the commit), anything outside the repository, another clone. Web content
stays external.

The declaration is part of the hook's mapping (claude-hook.yaml) with the manifest of
vouched files (DIR/claude-workspaces/), so after freeze it counts only under the
operator's seal: the command seals the configuration again with the operator key
(--operator-key, else $PEDIGREE_OPERATOR_KEY, else the one init wrote). --list shows the declarations as the
hook counts them: after freeze it checks the mapping against the operator's seal and
each manifest against its declaration, and fails (exit 1) naming what does not verify.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if list {
				if len(args) > 0 {
					return usagef("--list takes no DIR")
				}
				// As the hook counts them: under the operator's seal, each
				// manifest as its declaration pins it.
				b, err := a.backend(ctx)
				if err != nil {
					return err
				}
				defer b.Close()
				view, err := b.Registry(ctx)
				if err != nil {
					return err
				}
				m, err := hook.Declarations(a.dir, view)
				if err != nil {
					return fmt.Errorf("the trusted workspaces cannot be listed: %w", err)
				}
				ws := m.Workspaces
				if ws == nil {
					ws = []hook.Workspace{}
				}
				return a.print(struct {
					Version    int              `json:"version"`
					Workspaces []hook.Workspace `json:"workspaces"`
				}{1, ws}, func(w io.Writer) {
					if len(ws) == 0 {
						fmt.Fprintln(w, "no workspace is trusted: every file the agent reads is unverified")
					}
					for _, x := range ws {
						fmt.Fprintf(w, "%s at commit %s: %d tracked files, tier %s (%s)\n", x.Root, x.Commit, x.Files, x.Tier, m.Repository[x.Tier])
					}
				})
			}
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			if err := a.refuseIfServed(ctx, "declare a trusted workspace"); err != nil {
				return err
			}
			// Before freeze no seal is written, and no key is needed. The
			// key is found as freeze and seal find it: --operator-key, else
			// $PEDIGREE_OPERATOR_KEY, else the keys directory's.
			op, kerr := a.loadOperator(opKey)
			root, err := a.trustRootOption()
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(a.dir)
			if err != nil {
				return err
			}
			ws, err := hook.TrustWorkspace(ctx, dir, path, tier, op, append(append([]pedigree.Option{pedigree.WithClock(a.clock)}, a.storeKeys()...), root...)...)
			if err != nil && kerr != nil {
				return fmt.Errorf("%w (the operator key: %v)", err, kerr)
			}
			if err != nil {
				return err
			}
			return a.print(ws, func(w io.Writer) {
				fmt.Fprintf(w, "trusted: %s at commit %s, %d tracked files, tier %s\n", ws.Root, ws.Commit, ws.Files, ws.Tier)
				fmt.Fprintln(w, "not trusted: untracked, ignored or modified files, later commits, anything outside it")
			})
		},
	}
	cmd.Flags().StringVar(&tier, "tier", registry.Internal.String(), "the tier the repository's content is signed at: user or internal")
	cmd.Flags().StringVar(&opKey, "operator-key", "", "operator private key, to seal the declaration after freeze: a file or a KMS key reference (default: $PEDIGREE_OPERATOR_KEY, else the keys directory's operator-<h>.key)")
	cmd.Flags().BoolVar(&list, "list", false, "list the trusted workspaces")
	return cmd
}
