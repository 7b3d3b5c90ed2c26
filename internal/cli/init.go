package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
)

func newInitCommand(a *app) *cobra.Command {
	var tau float64
	cmd := &cobra.Command{
		Use:   "init [--tau 0.5]",
		Short: "Create the data directory, the store and the operator key",
		Long: `Create the data directory, the store, and the operator key (operator.key, mode
0600), which signs the registry freeze. tau is the strong-edge threshold: an edge
of weight >= tau carries taint. It is stored with the registry and frozen with it.
init refuses a directory that already holds a store.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.refuseIfServed(cmd.Context(), "initialise it again"); err != nil {
				return err
			}
			e, err := pedigree.Init(cmd.Context(), a.dir, tau, pedigree.WithClock(a.clock))
			if err != nil {
				return err
			}
			defer e.Close()
			key := filepath.Join(a.dir, pedigree.OperatorKeyFile)
			return a.print(initOutput{v: v1, Dir: a.dir, Tau: tau, OperatorKey: key}, func(w io.Writer) {
				fmt.Fprintf(w, "initialised %s (tau %v)\noperator key: %s (keep it safe: it freezes the registry)\n", a.dir, tau, key)
			})
		},
	}
	cmd.Flags().Float64Var(&tau, "tau", pedigree.DefaultTau, "strong-edge threshold, in (0, 1]")
	return cmd
}
