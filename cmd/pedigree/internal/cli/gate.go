package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
)

func newGateCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "Decide on sensitive tool calls, approve denied ones, read the decision log",
		Args:  noArgs,
	}
	cmd.AddCommand(newGateCheck(a), newGatePending(a), newGateApprove(a), newGateReject(a), newGateLog(a), newGateReevaluate(a))
	return cmd
}

// gateOptions are the flags that load another policy or catalog.
type gateOptions struct {
	policies string
	tools    []string
	replace  bool
}

func (g *gateOptions) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&g.policies, "policies", "", "Rego directory that extends the default policy (rules in package pedigree.ext)")
	cmd.Flags().BoolVar(&g.replace, "replace-policy", false, "the --policies directory replaces the default policy (it defines package pedigree.gate)")
	cmd.Flags().StringSliceVar(&g.tools, "tools", nil, "tool catalog files, merged: FILE,... or repeated (default DIR/tools.yaml)")
}

// check refuses --replace-policy without a directory to replace it with.
func (g *gateOptions) check() error {
	if g.replace && g.policies == "" {
		return usagef("--replace-policy needs --policies DIR")
	}
	return nil
}

// load reads the --policies directory as the flags say: extension or
// replacement.
func (g *gateOptions) load() (*gate.Policy, error) {
	if g.replace {
		return gate.ReplacementPolicyFromDir(g.policies)
	}
	return gate.PolicyFromDir(g.policies)
}

func (g *gateOptions) options() []pedigree.Option {
	var o []pedigree.Option
	if g.policies != "" && g.replace {
		o = append(o, pedigree.WithReplacementPolicyDir(g.policies))
	} else if g.policies != "" {
		o = append(o, pedigree.WithPolicyDir(g.policies))
	}
	if len(g.tools) > 0 {
		o = append(o, pedigree.WithToolsFiles(g.tools...))
	}
	return o
}

func newGateCheck(a *app) *cobra.Command {
	var as, key, session, tool, args, plan string
	var step int
	var just, argSpecs []string
	var g gateOptions
	cmd := &cobra.Command{
		Use:   "check --as PRINCIPAL --key FILE --session S --tool NAME [--args JSON] [--justification ID,...] [--arg NAME=ID,...] [--plan ID --step N]",
		Short: "Ask the gate whether a proposed tool call may run",
		Long: `Record the proposed call as a signed call entry and decide on it: allow (exit 0),
deny (exit 3) or ask, needs a human (exit 4). The call's ID (call_id) is the
parent that the tool's output names when it is recorded.

--justification lists the entries the agent relied on; without it, the
justification is the session's whole context. An empty list (--justification ""
or ",") is a usage error, never "nothing". --arg NAME=ID,... says which entries
an argument's value came from (repeatable); an argument without it comes from the
whole justification. Per-argument rules in the tool catalog decide which arguments
must be trusted.

--plan ID --step N cites step N (0-based) of a plan recorded with 'plan record'.
When the call matches the step exactly, its justification is the plan and the
sources of its data arguments (--arg), not the session's context; otherwise the
ordinary rules apply and the decision says why the plan was not used. An unknown
plan, a plan of another session or a step the plan does not have is an error.
A protected argument the step delegates ('plan record') that comes from exactly
the source the step names is asked (exit 4), with its value and source shown.

The gate fails closed: an unknown or unverifiable justification, a policy error,
an undefined decision or a timeout all deny, with the cause in the reasons. A call
proposed by an unverified or external principal is denied. --args with a key
twice in one object, or that is not valid UTF-8, is refused (exit 1): the gate
decides on exactly the arguments the tool gets.

--policies DIR extends the default policy with deny and ask rules in package
pedigree.ext; a module anywhere else under package pedigree is refused, unless
--replace-policy says DIR is the whole policy. Policies may call pure builtins
only (no network, files, environment or randomness).

  pedigree gate check --as agent:assistant --key agent.key --session s1 \
      --tool send_money --args '{"to":"123-456"}' --justification 3f2a9c1e`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" || tool == "" {
				return usagef("--session and --tool are required")
			}
			if args != "" {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
					return usagef("--args %q: want a JSON object, like '{\"to\": \"123-456\"}'", clipArg(args))
				}
			}
			if err := g.check(); err != nil {
				return err
			}
			srcs := map[string][]string{}
			for _, spec := range argSpecs {
				name, ids, ok := strings.Cut(spec, "=")
				if !ok || name == "" || ids == "" {
					return usagef("--arg %q: want NAME=ID,...", spec)
				}
				srcs[name] = append(srcs[name], splitList(ids)...)
			}
			e, s, err := a.backendAs(cmd.Context(), as, key, g.options()...)
			if err != nil {
				return err
			}
			defer e.Close()
			if cmd.Flags().Changed("step") && plan == "" {
				return usagef("--step needs --plan")
			}
			if plan != "" && !cmd.Flags().Changed("step") {
				return usagef("--plan needs --step N")
			}
			if step < 0 {
				return usagef("--step must not be negative")
			}
			c := pedigree.Call{Principal: as, Session: session, Tool: tool, ArgSources: srcs, Plan: plan, PlanStep: step}
			if args != "" {
				c.Args = []byte(args)
			}
			if cmd.Flags().Changed("justification") {
				if c.Justification, err = justificationFlag(just); err != nil {
					return err
				}
			}
			d, err := e.Check(cmd.Context(), s, c)
			if err != nil {
				return err
			}
			if err := a.print(d, func(w io.Writer) { printDecision(w, d, false) }); err != nil {
				return err
			}
			return decisionExit(d)
		},
	}
	f := cmd.Flags()
	f.StringVar(&as, "as", "", "the principal proposing the call (the agent)")
	f.StringVar(&key, "key", "", "its private key: a file, or a KMS or PKCS#11 key reference (hashivault://NAME, pkcs11:..., see docs/keys.md)")
	f.StringVar(&session, "session", "", "the session")
	f.StringVar(&tool, "tool", "", "the tool")
	f.StringVar(&args, "args", "", "the call's arguments, a JSON object")
	f.StringSliceVar(&just, "justification", nil, "entries the call relies on, ID,... (default: the session's context)")
	f.StringArrayVar(&argSpecs, "arg", nil, "where an argument came from, NAME=ID,... (repeatable)")
	f.StringVar(&plan, "plan", "", "the plan (ID or prefix) whose step this call carries out")
	f.IntVar(&step, "step", 0, "the plan step, 0-based (with --plan)")
	g.add(cmd)
	return cmd
}

// justificationFlag reads --justification: an empty list, or an empty item,
// is a usage error (it would otherwise mean "relies on nothing").
func justificationFlag(vals []string) ([]string, error) {
	out := []string{}
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return nil, usagef("--justification %q names an empty ID: list the entries the call relies on, or leave the flag out for the session's whole context", strings.Join(vals, ","))
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, usagef("--justification is empty: list the entries the call relies on, or leave the flag out for the session's whole context")
	}
	return out, nil
}

func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// decisionExit turns a decision into the exit code: 0 allow, 3 deny, 4 ask.
// Anything else is a deny.
func decisionExit(d *gate.Decision) error {
	switch d.Decision {
	case gate.Allow:
		return nil
	case gate.Ask:
		return verdictError{ExitAsk, "the call needs a human's approval"}
	default:
		return verdictError{ExitNegative, "the call is denied"}
	}
}

func printDecision(w io.Writer, d *gate.Decision, color bool) {
	fmt.Fprintf(w, "%s %s (decision %s, call %s)\n", paint(color, d.Decision), d.Tool, short(d.ID), short(d.CallID))
	for _, r := range d.Reasons {
		fmt.Fprintf(w, "  reason: %s\n", line(w, r))
	}
	if p := d.Plan; p != nil {
		if p.Authority {
			fmt.Fprintf(w, "  plan: %s step %d, the control justification\n", short(p.ID), p.Step)
		} else {
			fmt.Fprintf(w, "  plan: %s step %d, no authority: %s\n", short(p.ID), p.Step, line(w, p.Why))
		}
	}
	for _, u := range d.Untrusted {
		path := make([]string, len(u.Path))
		for i, p := range u.Path {
			path[i] = short(p)
		}
		strength := "strong"
		if !u.Strong {
			strength = "weak"
		}
		fmt.Fprintf(w, "  untrusted: %s (%s) via %s path %s\n", u.Principal, u.Tier, strength, strings.Join(path, " <- "))
	}
	for _, x := range d.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", line(w, x))
	}
}

func paint(color bool, decision gate.Outcome) string {
	word := strings.ToUpper(string(decision))
	if !color {
		return word
	}
	code := map[gate.Outcome]string{gate.Allow: "32", gate.Deny: "31", gate.Ask: "33"}[decision]
	return "\x1b[1;" + code + "m" + word + "\x1b[0m"
}

func newGateApprove(a *app) *cobra.Command {
	var as, key string
	var ttl time.Duration
	var yes bool
	cmd := &cobra.Command{
		Use:   "approve DECISION_ID --as PRINCIPAL --key FILE [--ttl 15m] [--yes]",
		Short: "Approve a denied call once, as a principal registered with --approver",
		Long: `Record a signed approval of a denied (or ask) decision. The approval names the
decision, whose ID hashes its proposer, session, justification and the sha256 of its
exact tool and canonical arguments, so it binds all of them; it expires after --ttl,
which may not exceed the cap set at init (--max-approval-ttl, 24h by default). The
next identical check (same proposer, session, action and justification) is allowed
once and consumes it; anything else, a second use or an expired approval has no
effect. A decision gets one approval: a second is refused, and so is an approval of a
rejected decision ('gate reject'). Only a user-tier principal registered with
'registry add ... --approver' can approve.

Before it signs, approve prints exactly what is approved: the tool, each
argument (every protected one first and whole, with where it came from; others
shortened, saying how much was left out), the session, the proposer and the
reasons (on stderr with -o json), control characters shown escaped. When stdin
is a terminal it then asks for confirmation, unless --yes; when it is not (a
script, a pipe, CI), it never waits: the printed call is the record of what was
approved.

Example:
  pedigree gate approve 3f2a9c1e --as user:alice --key alice.key --ttl 10m`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl <= 0 {
				return usagef("--ttl must be positive")
			}
			e, s, err := a.backendAs(cmd.Context(), as, key)
			if err != nil {
				return err
			}
			defer e.Close()
			subj, err := subjectOf(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			shown := a.out
			if a.output == "json" {
				shown = a.errw
			}
			if err := safeText(shown, func(w io.Writer) { describeSubject(w, subj) }); err != nil {
				return err
			}
			if !yes && interactive(a.in) && !confirm(a.in, shown, "approve this call once?") {
				return fmt.Errorf("%w: not confirmed; nothing was signed", gate.ErrApproval)
			}
			n, err := e.Approve(cmd.Context(), s, as, subj.DecisionID, ttl)
			if err != nil {
				return err
			}
			out := approveOutput{v: v1, ApprovalID: n.ID, DecisionID: subj.DecisionID, Approver: as, TTL: ttl.String(),
				Tool: subj.Tool, Args: subj.Args, Session: subj.Session}
			return a.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "approved once: %s (approval %s, expires in %s)\n", args[0], short(n.ID), ttl)
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation at a terminal")
	cmd.Flags().StringVar(&as, "as", "", "the approving principal (user tier, registered with --approver)")
	cmd.Flags().StringVar(&key, "key", "", "its private key: a file, or a KMS or PKCS#11 key reference (hashivault://NAME, pkcs11:..., see docs/keys.md)")
	cmd.Flags().DurationVar(&ttl, "ttl", pedigree.DefaultApprovalTTL, "how long the approval stays usable")
	return cmd
}

func newGateLog(a *app) *cobra.Command {
	var limit int
	var session string
	cmd := &cobra.Command{
		Use:   "log [--limit N] [--session S]",
		Short: "List logged decisions, oldest first",
		Long: `List the decision log: decision ID, time, principal, session, tool, digest of the
canonical arguments, justification, decision, reasons and policy version, and for
a deny or an ask that a person answered, the approval or rejection ("reviews" in
-o json: decision_id, outcome approved|rejected, by, time, entry).`,
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
			ds, err := e.Decisions(cmd.Context(), pedigree.DecisionQuery{Limit: limit, Session: session})
			if err != nil {
				return err
			}
			rs, err := e.Reviews(cmd.Context())
			if err != nil {
				return err
			}
			byDecision := reviewsByDecision(rs)
			shown := []gate.Review{}
			for _, d := range ds {
				if r, ok := byDecision[d.ID]; ok {
					shown = append(shown, r)
				}
			}
			return a.print(decisionsOutput{v: v1, Decisions: ds, Reviews: shown}, func(w io.Writer) {
				for _, d := range ds {
					fmt.Fprintf(w, "%s %s %-5s %-24s %s session %s policy %s\n", d.Time, short(d.ID), d.Decision, d.Tool, d.Principal, d.Session, d.PolicyVersion)
					for _, r := range d.Reasons {
						fmt.Fprintf(w, "    %s\n", line(w, r))
					}
					if r, ok := byDecision[d.ID]; ok {
						fmt.Fprintf(w, "    %s by %s at %s (entry %s)\n", r.Outcome, r.By, r.Time, short(r.Entry))
					}
				}
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "show only the last N decisions (0: all)")
	cmd.Flags().StringVar(&session, "session", "", "show only this session's decisions")
	return cmd
}

// clipArg shortens a flag value quoted back in an error.
func clipArg(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "..."
	}
	return s
}
