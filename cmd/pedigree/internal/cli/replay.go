package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/replay"
	"github.com/pedigree-ai/pedigree/gate"
)

func newReplayCommand(a *app) *cobra.Command {
	var g gateOptions
	var verbose bool
	var workers int
	cmd := &cobra.Command{
		Use:   "replay FILE... [--policies DIR] [--tools FILE,...] [--verbose]",
		Short: "Run recorded agent sessions through the engine and score the decisions",
		Long: `Run scenarios (JSON Lines, one recorded session a line: see docs/SCENARIOS.md)
through the real lineage and the real gate, each in a fresh in-memory store: a key
is generated per principal, the registry frozen, then every step runs in order.
Lineage is taken exactly as written. Tools listed in a scenario's "sensitive" are
sensitive; the others are not (--tools adds roles and per-argument rules).

Prints the attack success rate (attack calls allowed), the benign allow rate, the
agreement with "expect" and every mismatch. A scenario the engine rejects is an
error in the summary, unless it says "expect_error": TEXT: then a refusal that
contains TEXT is agreement, and a scenario that runs to the end is an error.
Exit 3 when a decision differs from expect or a scenario errs unexpectedly.
--verbose prints every decision with its reasons.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			var o replay.Options
			if workers < 0 {
				return usagef("--workers must not be negative (0: one per CPU)")
			}
			o.Workers = workers
			var err error
			if err := g.check(); err != nil {
				return err
			}
			if g.policies != "" {
				if o.Policy, err = g.load(); err != nil {
					return err
				}
			}
			if len(g.tools) > 0 {
				if o.Catalog, err = gate.LoadCatalogs(g.tools...); err != nil {
					return err
				}
			}
			var all []replay.Scenario
			var bad []error
			for _, f := range files {
				fh, err := os.Open(f)
				if err != nil {
					return err
				}
				s, b, err := replay.Parse(fh)
				fh.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				for _, e := range b {
					bad = append(bad, fmt.Errorf("%s: %w", f, e))
				}
				all = append(all, s...)
			}
			var each func(replay.Result)
			if verbose {
				enc := json.NewEncoder(a.errw)
				each = func(r replay.Result) {
					if a.output == "json" {
						enc.Encode(r)
						return
					}
					// Each result through its own escaping writer: results
					// stream as the scenarios run.
					safeText(a.out, func(w io.Writer) {
						if err := r.Unexpected(); err != nil {
							fmt.Fprintf(w, "%s: ERROR %v\n", r.Scenario, err)
						} else if r.Err != nil {
							fmt.Fprintf(w, "%s: refused, as expected: %v\n", r.Scenario, r.Err)
						}
						for _, c := range r.Calls {
							mark := ""
							if c.Expect != "" && gate.Outcome(c.Expect) != c.Got {
								mark = "  MISMATCH, expected " + c.Expect
							}
							fmt.Fprintf(w, "%s %s %s: %s%s\n", r.Scenario, c.Call, c.Tool, c.Got, mark)
							for _, reason := range c.Reasons {
								fmt.Fprintf(w, "    %s\n", line(w, reason))
							}
							for _, x := range c.Warnings {
								fmt.Fprintf(w, "    warning: %s\n", line(w, x))
							}
						}
					})
				}
			}
			sum, err := replay.Run(cmd.Context(), all, o, each)
			if err != nil {
				return err
			}
			for _, e := range bad {
				var pe *replay.ParseError
				name := "unparsed line"
				if errors.As(e, &pe) {
					name = fmt.Sprintf("line %d", pe.Line)
				}
				sum.Errors++
				sum.Scenarios++
				sum.ErrorList = append(sum.ErrorList, replay.ScenarioError{Scenario: name, Error: e.Error()})
			}
			err = a.print(sum, func(w io.Writer) { printSummary(w, sum) })
			if err == nil && sum.Failed() {
				return verdictError{ExitNegative, "replay disagreed with expect"}
			}
			return err
		},
	}
	g.add(cmd)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every decision with its reasons")
	cmd.Flags().IntVar(&workers, "workers", 0, "scenarios run in parallel (default: number of CPUs)")
	return cmd
}

func printSummary(w io.Writer, s *replay.Summary) {
	fmt.Fprintf(w, "scenarios   %d (%d errors, %d refused as expected) in %.1fs\n", s.Scenarios, s.Errors, s.Refused, s.WallSeconds)
	fmt.Fprintf(w, "attack      %d calls, %d allowed, %d asked, %d denied: attack success rate %.4f\n", s.AttackCalls, s.AttackAllowed, s.AttackAsked, s.AttackDenied, s.ASR)
	fmt.Fprintf(w, "benign      %d calls, %d allowed, %d asked, %d denied: benign allow rate %.4f\n", s.BenignCalls, s.BenignAllowed, s.BenignAsked, s.BenignDenied, s.BenignAllowRate)
	fmt.Fprintf(w, "completion  of %d scenarios with gated calls, every gated call allowed in %d (%.4f), allowed or asked in %d (%.4f)\n",
		s.GatedScenarios, s.AllAllowed, s.AllAllowedShare, s.AllAllowedOrAsked, s.AllAllowedOrAskedShare)
	fmt.Fprintf(w, "tasks       of %d scenarios with gated benign calls, completed with no one asked in %d (%.4f), with at most one confirmation in %d (%.4f)\n",
		s.Tasks, s.TasksUnattended, s.TasksUnattendedShare, s.TasksOneConfirmation, s.TasksOneConfirmationShare)
	fmt.Fprintf(w, "agreement   %d of %d calls with expect: %.4f\n", s.Agreed, s.Expected, s.Agreement)
	for _, m := range s.Mismatches {
		fmt.Fprintf(w, "  mismatch  %s %s: expected %s, got %s\n", m.Scenario, m.Call, m.Expect, m.Got)
	}
	for _, e := range s.ErrorList {
		fmt.Fprintf(w, "  error     %s: %s\n", e.Scenario, e.Error)
	}
}
