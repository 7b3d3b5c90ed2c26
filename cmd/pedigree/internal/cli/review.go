package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
)

func newGatePending(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pending",
		Short: "List denies and asks a person can still approve or reject, newest first",
		Long: `List the decisions nobody has approved or rejected yet, newest first, with the
evidence to decide on: the tool and its arguments, every protected argument first
and whole, with where it came from (explicit sources, or the whole justification;
the other arguments shortened, saying how much was left out), the untrusted roots
and the path from the call to each, and the reasons. -o json holds every argument
whole and whether it is protected. Close one with 'gate approve ID' or
'gate reject ID'.

  pedigree gate pending
  pedigree gate pending -o json | jq '.pending[0].decision_id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			ps, err := e.Pending(cmd.Context())
			if err != nil {
				return err
			}
			if ps == nil {
				ps = []gate.Pending{}
			}
			return a.print(pendingOutput{v: v1, Pending: ps}, func(w io.Writer) {
				if len(ps) == 0 {
					fmt.Fprintln(w, "nothing pending")
				}
				for _, p := range ps {
					printPending(w, p)
				}
			})
		},
	}
}

// printPending shows one pending decision: the call's exact view (every
// protected argument whole, first, with its sources; see gate.Pending.View),
// the untrusted roots and the reasons.
func printPending(w io.Writer, p gate.Pending) {
	fmt.Fprintf(w, "%s %s %s session %s by %s\n", short(p.DecisionID), strings.ToUpper(string(p.Decision)), line(w, p.Tool), line(w, p.Session), p.Principal)
	fmt.Fprintf(w, "  at %s, call %s\n", p.Time, short(p.CallID))
	if p.Plan != nil {
		fmt.Fprintf(w, "  cites plan %s step %d\n", short(p.Plan.ID), p.Plan.Step)
	}
	printView(w, &p)
	for _, u := range p.Untrusted {
		path := make([]string, len(u.Path))
		for i, id := range u.Path {
			path[i] = short(id)
		}
		fmt.Fprintf(w, "  untrusted: %s (%s) path %s\n", u.Principal, u.Tier, strings.Join(path, " <- "))
	}
	for _, r := range p.Reasons {
		fmt.Fprintf(w, "  reason: %s\n", line(w, r))
	}
}

// printView prints a call's exact view, one argument a line.
func printView(w io.Writer, p *gate.Pending) {
	lines, n := p.View()
	counted(w, n)
	for _, l := range lines {
		fmt.Fprintf(w, "  argument %s\n", l)
	}
}

func newGateReject(a *app) *cobra.Command {
	var as, key string
	cmd := &cobra.Command{
		Use:   "reject DECISION_ID --as PRINCIPAL --key FILE",
		Short: "Reject a denied or asked call, as a user-tier principal",
		Long: `Record a signed rejection of a deny or an ask: the decision leaves 'gate pending'
and can no longer be approved. The rejection binds the decision's session and the
digest of its exact tool and canonical arguments. Only a user-tier principal
rejects; a decision already approved or rejected is refused.

  pedigree gate reject 3f2a9c1d --as user:alice --key alice.key`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, s, err := a.backendAs(cmd.Context(), as, key)
			if err != nil {
				return err
			}
			defer e.Close()
			n, err := e.Reject(cmd.Context(), s, as, args[0])
			if err != nil {
				return err
			}
			return a.print(rejectOutput{v: v1, RejectionID: n.ID, DecisionID: args[0], Rejecter: as}, func(w io.Writer) {
				fmt.Fprintf(w, "rejected: %s (rejection %s)\n", args[0], short(n.ID))
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "the rejecting user-tier principal")
	cmd.Flags().StringVar(&key, "key", "", "its private key: a file, or a KMS or PKCS#11 key reference (hashivault://NAME, pkcs11:..., see docs/keys.md)")
	return cmd
}

// subjectOf is what an approval will approve: the decision and the exact
// call, read back from the stored call entry.
func subjectOf(ctx context.Context, b pedigree.Backend, decisionID string) (*gate.Pending, error) {
	p, err := b.Subject(ctx, decisionID)
	if errors.Is(err, lineage.ErrUnknownEntry) {
		return nil, fmt.Errorf("%w: decision %s was made on a call entry that was refused; there is no call to approve", gate.ErrApproval, short(decisionID))
	}
	return p, err
}

// describeSubject is what approve prints before it signs: the call's exact
// view, where it was proposed, and why it was held.
func describeSubject(w io.Writer, p *gate.Pending) {
	fmt.Fprintf(w, "approving once: %s\n", line(w, p.Tool))
	printView(w, p)
	fmt.Fprintf(w, "  in session %s, proposed by %s (decision %s, %s)\n", line(w, p.Session), p.Principal, short(p.DecisionID), p.Decision)
	for _, r := range p.Reasons {
		fmt.Fprintf(w, "  reason: %s\n", line(w, r))
	}
}

// interactive reports whether r is a terminal a person answers at. A pipe,
// a file or a test's buffer is not: nothing then waits for an answer.
func interactive(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	// Not a character device test: /dev/null is one, and nobody answers there.
	return term.IsTerminal(int(f.Fd()))
}

// confirm asks on w and reads y or yes from r.
func confirm(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// reviewsByDecision indexes reviews for `gate log`.
func reviewsByDecision(rs []gate.Review) map[string]gate.Review {
	m := make(map[string]gate.Review, len(rs))
	for _, r := range rs {
		m[r.DecisionID] = r
	}
	return m
}
