package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
)

func newPlanCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Record the agent's plan, whose steps can stand as the justification of its calls",
		Args:  noArgs,
	}
	cmd.AddCommand(newPlanRecord(a))
	return cmd
}

func newPlanRecord(a *app) *cobra.Command {
	var as, key, session, steps, stepsFile string
	var parents []string
	cmd := &cobra.Command{
		Use:   "record --as PRINCIPAL --key FILE --session S (--steps JSON | --steps-file FILE) --parent ID...",
		Short: "Sign and record a plan made before the agent acts",
		Long: `Record a plan: steps of a tool and arguments, each argument a literal, the data
slot {"$data": true}, or a delegated slot, signed by the agent, with explicit
parents (what the plan was made from: the user's prompt). Prints the plan's ID.

A call that cites a step ('gate check --plan ID --step N') and matches it exactly
(the step's tool, every literal equal in canonical JSON, no other argument) has
the plan as its control justification instead of the session's context: each
data slot is then judged by its own sources (--arg NAME=ID) under the catalog's
argument rules. A plan whose effective tier is untrusted (made after reading
untrusted content) gives no authority; a call that does not match is judged by
the ordinary rules.

A delegated slot names where the value is to come from, when the user pointed at
the data ("pay the bill in bill.txt"): {"$data": {"step": N}} is the output of the
plan's earlier step N (a call citing step N and matching it; its output names
that call as its parent), {"$data": {"entry": ID}} one entry the user named (a full
ID). A call whose protected argument comes from exactly that source, and from
nothing else untrusted, is delegated: the gate asks (exit 4) and its reasons show
the value whole and where it came from, for a person to confirm ('gate approve');
the catalog's on_delegated (ask, deny, allow) can change that per tool. Whoever
controls the source controls the value.

  pedigree plan record --as agent:planner --key agent.key --session s1 --parent 5e1f0c2a \
    --steps '[{"tool":"file_read","args":{"path":"report.txt"}},
              {"tool":"email_send","args":{"to":"bob@example.com","body":{"$data":true}}}]'
  pedigree plan record --as agent:planner --key agent.key --session s1 --parent 5e1f0c2a \
    --steps '[{"tool":"file_read","args":{"path":"bill.txt"}},
              {"tool":"bank_transfer","args":{"iban":{"$data":{"step":0}},"amount":{"$data":{"step":0}}}}]'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" {
				return usagef("--session is required: a plan belongs to the session it is carried out in")
			}
			if (steps == "") == (stepsFile == "") {
				return usagef("give exactly one of --steps and --steps-file")
			}
			if len(parents) == 0 {
				return usagef("--parent is required: a plan names what it was made from")
			}
			raw := []byte(steps)
			if stepsFile != "" {
				b, err := readLimited(stepsFile, lineage.MaxContentBytes)
				if err != nil {
					return err
				}
				raw = b
			}
			if stepsFile == "" {
				var list []json.RawMessage
				if err := json.Unmarshal(raw, &list); err != nil {
					return usagef("--steps: want a JSON array of steps: %v", err)
				}
			}
			parsed, err := lineage.PlanSteps(raw)
			if err != nil {
				return err
			}
			if _, err := parentSpecs(parents); err != nil {
				return err
			}
			e, s, err := a.backendAs(cmd.Context(), as, key)
			if err != nil {
				return err
			}
			defer e.Close()
			ps, err := parseParents(cmd.Context(), e, parents)
			if err != nil {
				return err
			}
			n, err := e.Record(cmd.Context(), s, pedigree.Entry{Principal: as, Kind: lineage.KindPlan, Session: session,
				Content: raw, Parents: ps, Steps: parsed, StoreContent: true})
			if err != nil {
				return err
			}
			reg, err := e.Registry(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(entryJSON(n, n.Edges(reg.Tau)), func(w io.Writer) {
				fmt.Fprintln(w, n.ID)
				if !n.Effective.Trusted() {
					fmt.Fprintf(a.errw, "warning: the plan's effective tier is %s: it gives its calls no authority\n", n.Effective)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&as, "as", "", "the agent that signs the plan")
	f.StringVar(&key, "key", "", "its private key: a file, or a KMS or PKCS#11 key reference (hashivault://NAME, pkcs11:..., see docs/keys.md)")
	f.StringVar(&session, "session", "", "the session the plan is carried out in")
	f.StringVar(&steps, "steps", "", `the steps, a JSON array of {"tool": NAME, "args": {ARG: LITERAL | {"$data": true} | {"$data": {"step": N}} | {"$data": {"entry": ID}}}}`)
	f.StringVar(&stepsFile, "steps-file", "", "read the steps from a file")
	f.StringArrayVar(&parents, "parent", nil, "an entry the plan was made from, ID[=WEIGHT] (repeatable)")
	return cmd
}
