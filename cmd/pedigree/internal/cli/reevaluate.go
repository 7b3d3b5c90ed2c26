package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newGateReevaluate(a *app) *cobra.Command {
	var g gateOptions
	cmd := &cobra.Command{
		Use:   "reevaluate DECISION_ID [--policies DIR] [--tools FILE]",
		Short: "Evaluate a logged decision again and say whether anything changed",
		Long: `Run the policy again on the exact input a logged decision was made on, at the time
it was made. With the same policy version the decision must come out the same:
exit 0 says it did. Exit 3 says what changed: the policy version (the policies or
the tool catalog are not those the decision was made with: --policies and --tools
evaluate the log under a new policy before you deploy it), the decision, its
reasons, or the approval it used. The default policy's input lists only the
untrusted entries of a justification; a policy with an operator's modules reads
every entry, so the others are read back from the store before it runs.

A decision that failed closed before the policy ran (an unverifiable call, an
unknown justification) has no input to evaluate again: exit 1.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.backend(cmd.Context(), g.options()...)
			if err != nil {
				return err
			}
			defer e.Close()
			re, err := e.Reevaluate(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			err = a.print(re, func(w io.Writer) {
				if re.Same {
					fmt.Fprintf(w, "same: %s under policy %s, as logged (decision %s)\n", strings.ToUpper(string(re.Decision)), short(re.PolicyVersion), short(re.DecisionID))
					return
				}
				fmt.Fprintf(w, "changed: logged %s, now %s (decision %s)\n", strings.ToUpper(string(re.Logged)), strings.ToUpper(string(re.Decision)), short(re.DecisionID))
				for _, c := range re.Changes {
					fmt.Fprintf(w, "  %s\n", line(w, c))
				}
				for _, r := range re.Reasons {
					fmt.Fprintf(w, "  reason now: %s\n", line(w, r))
				}
			})
			if err == nil && !re.Same {
				err = verdictError{code: ExitNegative, msg: "the decision changed"}
			}
			return err
		},
	}
	g.add(cmd)
	return cmd
}
