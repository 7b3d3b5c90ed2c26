package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree/lineage"
)

func newLineageCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lineage",
		Short: "Show an entry and trace its ancestry to untrusted roots",
		Args:  noArgs,
	}
	cmd.AddCommand(newLineageTrace(a), newLineageShow(a))
	return cmd
}

// outputDot marks the verbs that also take -o dot.
const outputDot = "pedigree/output-dot"

func newLineageTrace(a *app) *cobra.Command {
	var format string
	var maxDepth, maxNodes int
	cmd := &cobra.Command{
		Use:   "trace ID [-o text|json|dot] [--max-depth N] [--max-nodes N]",
		Short: "Trace an entry's ancestry and the paths to its untrusted roots",
		Long: `Walk an entry's ancestry and list, for each untrusted root (an ancestor whose own
tier is unverified or external), the path from the entry to it. A strong path
taints the effective tier; a weak one (through an edge below tau) only the reach
tier. The walk is bounded by --max-depth and --max-nodes, and a truncated answer
says so. -o dot (this verb only) draws the bounded subgraph for Graphviz.
--format is a deprecated spelling of -o.`,
		Annotations: map[string]string{outputDot: "yes"},
		Args:        exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("format") {
				if cmd.Flags().Changed("output") && format != a.output {
					return usagef("-o %s and --format %s disagree: give -o only", a.output, format)
				}
				if format != "text" && format != "json" && format != "dot" {
					return usagef("--format must be text, json or dot, not %q", format)
				}
				a.output = format
				fmt.Fprintln(a.errw, "pedigree: --format is deprecated: use -o text|json|dot")
			}
			if maxDepth < 0 || maxNodes < 0 {
				return usagef("--max-depth and --max-nodes must not be negative")
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			tr, err := e.Trace(cmd.Context(), args[0], lineage.TraceOptions{MaxDepth: maxDepth, MaxNodes: maxNodes})
			if err != nil {
				return err
			}
			switch a.output {
			case "json":
				return a.printJSON(traceJSON(tr))
			case "dot":
				return tr.DOT(a.out)
			}
			return a.text(func(w io.Writer) { printTrace(w, tr) })
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, json or dot")
	cmd.Flags().MarkHidden("format") // deprecated: said on stderr when used
	cmd.Flags().IntVar(&maxDepth, "max-depth", lineage.DefaultTraceDepth, "how many edges deep to walk")
	cmd.Flags().IntVar(&maxNodes, "max-nodes", lineage.DefaultTraceNodes, "how many entries to visit at most")
	return cmd
}

func traceJSON(tr *lineage.Trace) traceOutput {
	nodes := make([]traceNodeOutput, 0, len(tr.Nodes))
	for _, n := range tr.Nodes {
		nodes = append(nodes, traceNodeOutput{ID: n.ID, Principal: n.Principal, Kind: n.Kind, Tier: n.Tier.String(), EffectiveTier: n.Effective.String(), ReachTier: n.Reach.String()})
	}
	edges := tr.Edges
	if edges == nil {
		edges = []lineage.Edge{}
	}
	untrusted := tr.Untrusted
	if untrusted == nil {
		untrusted = []lineage.Source{}
	}
	return traceOutput{v: v1, ID: tr.Root.ID, EffectiveTier: tr.Root.Effective.String(), ReachTier: tr.Root.Reach.String(),
		Nodes: nodes, Edges: edges, Untrusted: untrusted, Truncated: tr.Truncated}
}

func printTrace(w io.Writer, tr *lineage.Trace) {
	r := tr.Root
	fmt.Fprintf(w, "%s  %s %s  tier %s, effective %s, reach %s\n", r.ID, r.Principal, r.Kind, r.Tier, r.Effective, r.Reach)
	byID := map[string]*lineage.Node{}
	for _, n := range tr.Nodes {
		byID[n.ID] = n
	}
	if len(tr.Untrusted) == 0 {
		fmt.Fprintln(w, "no untrusted ancestor")
	}
	for _, s := range tr.Untrusted {
		kind := "strong path (taints the effective tier)"
		if !s.Strong {
			kind = "weak path only (reach tier)"
		}
		fmt.Fprintf(w, "untrusted root %s  %s (%s), %s:\n", short(s.ID), s.Principal, s.Tier, kind)
		for i, id := range s.Path {
			n := byID[id]
			fmt.Fprintf(w, "  %s%s  %-28s %-11s effective %s\n", strings.Repeat("  ", i), short(id), n.Principal, n.Kind, n.Effective)
		}
	}
	var weak []lineage.Edge
	for _, e := range tr.Edges {
		if !e.Strong {
			weak = append(weak, e)
		}
	}
	if len(weak) > 0 {
		fmt.Fprintln(w, "weak edges (kept for explanation, carry no taint):")
		for _, e := range weak {
			fmt.Fprintf(w, "  %s <- %s  weight %v\n", short(e.Child), short(e.Parent), e.Weight)
		}
	}
	fmt.Fprintf(w, "%d entries, %d edges", len(tr.Nodes), len(tr.Edges))
	if tr.Truncated {
		fmt.Fprint(w, " (TRUNCATED: raise --max-depth or --max-nodes to see more)")
	}
	fmt.Fprintln(w)
}

func newLineageShow(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show an entry: its statement, signature check and labels",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			v, err := e.Show(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			n, edges, env, content := v.Node, v.Parents, v.Envelope, v.Content
			st, _, _, err := lineage.Open(env)
			if err != nil {
				return err
			}
			var sigErr error
			if v.SignatureError != "" {
				sigErr = errors.New(v.SignatureError)
			}
			out := entryJSON(n, edges)
			out.showFields = &showFields{SignatureValid: sigErr == nil, Time: st.Time, ContentDigest: st.ContentDigest,
				EffectiveVia: n.EffectiveVia, ReachVia: n.ReachVia, Tool: st.Tool, Args: st.Args,
				Steps: st.Steps, Plan: st.Plan, Rejection: st.Rejection}
			if content != nil {
				c := string(content)
				out.Content = &c
			}
			return a.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "entry     %s\nprincipal %s (tier %s)\nkind      %s\n", n.ID, n.Principal, n.Tier, n.Kind)
				if n.Session != "" {
					fmt.Fprintf(w, "session   %s\n", n.Session)
				}
				fmt.Fprintf(w, "time      %s\ncontent   %s\n", st.Time, st.ContentDigest)
				if st.Tool != "" {
					fmt.Fprintf(w, "call      %s %s\n", line(w, st.Tool), line(w, string(st.Args)))
				}
				if st.Plan != nil {
					fmt.Fprintf(w, "plan      %s step %d\n", short(st.Plan.ID), st.Plan.Step)
				}
				for i, step := range st.Steps {
					fmt.Fprintf(w, "step %-4d %s %s\n", i, line(w, step.Tool), line(w, string(step.Args)))
				}
				if st.Rejection != nil {
					fmt.Fprintf(w, "rejects   decision %s\n", short(st.Rejection.Decision))
				}
				if sigErr == nil {
					fmt.Fprintf(w, "signature valid (%s)\n", n.Principal)
				} else {
					fmt.Fprintf(w, "signature INVALID: %s\n", line(w, sigErr.Error()))
				}
				fmt.Fprintf(w, "effective %s", n.Effective)
				if n.EffectiveVia != "" {
					fmt.Fprintf(w, " (set by strong parent %s)", short(n.EffectiveVia))
				} else {
					fmt.Fprint(w, " (its own tier)")
				}
				fmt.Fprintf(w, "\nreach     %s", n.Reach)
				if n.ReachVia != "" {
					fmt.Fprintf(w, " (set by parent %s)", short(n.ReachVia))
				}
				fmt.Fprintln(w)
				for _, ed := range edges {
					s := "strong"
					if !ed.Strong {
						s = "weak"
					}
					fmt.Fprintf(w, "parent    %s weight %v (%s)\n", ed.Parent, ed.Weight, s)
				}
				if content != nil {
					fmt.Fprintf(w, "\n%s\n", content)
				}
			})
		},
	}
}
