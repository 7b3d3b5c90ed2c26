package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/trajectory"
	"github.com/pedigree-ai/pedigree/trajectory/offline"
)

func newTrajectoryCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trajectory",
		Short: "Tool-call sequence features and soft alerts per session",
		Long: `The trajectory detector reads the structure of a session's tool calls (their
roles from the tool catalog: recall, list, save, draft, send, rag, other), never
their content, and raises soft alerts: evidence for the gate and for people. The
default policy never denies or asks on an alert alone; the optional module
policies/trajectory (--policies policies/trajectory on gate check, serve or
replay) asks a human before an external send after recalls.`,
		Args: noArgs,
	}
	cmd.AddCommand(newTrajectoryShow(a), newTrajectoryTrain(a), newTrajectoryEval(a), newTrajectoryGenerate(a))
	return cmd
}

func newTrajectoryShow(a *app) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "show --session S",
		Short: "Show a session's calls, features and alerts",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" {
				return usagef("--session is required")
			}
			e, err := a.backend(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			st, err := e.Trajectory(cmd.Context(), session)
			if err != nil {
				return err
			}
			calls, alerts := st.Calls, st.Alerts
			if calls == nil {
				calls = []trajectory.Call{}
			}
			if alerts == nil {
				alerts = []trajectory.Alert{}
			}
			out := trajectoryShowOutput{v: v1, Session: session, Calls: calls, Features: st.FeatureMap(), Alerts: alerts}
			return a.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "session %s: %d calls\n", session, st.Len)
				for i, c := range calls {
					fmt.Fprintf(w, "  %3d %-8s %s", i, c.Role, c.Tool)
					if c.RecipientExternal {
						fmt.Fprint(w, "  (external recipient)")
					} else if c.RecipientUnknown() {
						fmt.Fprint(w, "  (recipient unknown)")
					}
					if c.RecipientUntrusted {
						fmt.Fprint(w, "  (recipient from untrusted content)")
					}
					fmt.Fprintln(w)
				}
				fmt.Fprintln(w, "features:")
				for i, v := range st.Features() {
					fmt.Fprintf(w, "  %-26s %g\n", trajectory.FeatureNames[i], v)
				}
				if len(alerts) == 0 {
					fmt.Fprintln(w, "no alerts")
				}
				for _, al := range alerts {
					fmt.Fprintf(w, "alert at call %d [%s]: %s\n", al.At, al.Rule, line(w, al.Message))
				}
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session")
	return cmd
}

// catalogFor loads --tools, else DIR/tools.yaml.
func (a *app) catalog(tools []string) (*gate.Catalog, error) {
	if len(tools) == 0 {
		p := filepath.Join(a.dir, pedigree.ToolsFile)
		if _, err := os.Stat(p); err != nil {
			return nil, usagef("no tool catalog: give --tools FILE (or put tools.yaml in the data directory); roles come from it")
		}
		tools = []string{p}
	}
	return gate.LoadCatalogs(tools...)
}

func readSessions(path string) ([]offline.Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ss, err := offline.ReadSessions(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("%s: %w", path, offline.ErrNoSessions)
	}
	return ss, nil
}

func newTrajectoryTrain(a *app) *cobra.Command {
	var model string
	var tools []string
	cmd := &cobra.Command{
		Use:   "train FILE --model OUT [--tools FILE]",
		Short: "Train the trajectory model on labelled sessions",
		Long: `Train a logistic-regression model on labelled sessions (one JSON object a line:
{"id", "label": "attack"|"benign", "calls": [{"tool", "args"}]}). Its alert
threshold is fixed at 0.5, never fitted. Put the model at DIR/trajectory-model.json
for the gate to load it at start.

This is the way to fit a model on your own labelled sessions: export your
harness's sessions in the format above, label them, train on some and measure
on the others with 'trajectory eval --model'.

` + demoNote + `

Example:
  pedigree trajectory train mine.jsonl --model trajectory-model.json --tools tools.yaml
  pedigree trajectory eval held-out.jsonl --model trajectory-model.json --tools tools.yaml`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if model == "" {
				return usagef("--model OUT is required")
			}
			cat, err := a.catalog(tools)
			if err != nil {
				return err
			}
			ss, err := readSessions(args[0])
			if err != nil {
				return err
			}
			m, err := offline.TrainSessions(ss, cat.TrajectoryCall, trajectory.TrainOptions{})
			if err != nil {
				return err
			}
			if err := m.Save(model); err != nil {
				return err
			}
			return a.print(trainOutput{v: v1, Model: model, Sessions: len(ss), Threshold: m.Threshold}, func(w io.Writer) {
				fmt.Fprintf(w, "trained on %d sessions: %s (threshold %.2f)\n", len(ss), model, m.Threshold)
			})
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "where to write the model")
	cmd.Flags().StringSliceVar(&tools, "tools", nil, "tool catalog files, merged (default DIR/tools.yaml)")
	return cmd
}

// evalOutput is `trajectory eval -o json`. The top-level figures are the
// rules' (CLI.md); Model is there with --model, ModelCV and Folds without.
// StructureOnly holds the same detectors with every argument left out, on
// the same sessions, when the file carries arguments.
type evalOutput struct {
	Version   int     `json:"version"`
	Sessions  int     `json:"sessions"`
	Attack    int     `json:"attack"`
	Benign    int     `json:"benign"`
	AUC       float64 `json:"auc"`
	Recall    float64 `json:"alert_rate_attack"`
	FPR       float64 `json:"alert_rate_benign"`
	Arguments bool    `json:"arguments"`
	evalFigures
	Folds         int          `json:"folds,omitempty"`
	StructureOnly *evalFigures `json:"structure_only,omitempty"`
}

// evalFigures are one view's figures: the rules, and the model measured
// either as given (--model) or by cross-validation.
type evalFigures struct {
	Rules   offline.Metrics  `json:"rules"`
	Model   *offline.Metrics `json:"model,omitempty"`
	ModelCV *offline.Metrics `json:"model_cv,omitempty"`
}

// demoNote is what train and eval say of the model trained on generated
// sessions.
const demoNote = `A model trained on 'trajectory generate' sessions is a demonstration of the
pipeline, not a detector: the generator's distribution is not reality (on real
agent traces, measured elsewhere, such a model scored an AUC below 0.5). Fit one
on your own labelled sessions with 'trajectory train'.`

func newTrajectoryEval(a *app) *cobra.Command {
	var model string
	var tools []string
	var folds int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "eval FILE [--model FILE] [--tools FILE] [--folds K]",
		Short: "Measure the detector on labelled sessions: AUC, recall, false-positive rate",
		Long: `Measure the invariant rules on labelled sessions, and with --model that model too
(AUC, and recall and false-positive rate at its threshold). Without --model, a
model is also measured by K-fold cross-validation on FILE (train on K-1 folds,
evaluate on the held-out one). When FILE carries arguments, the same detectors
are also measured with every argument left out ("structure only"), on the same
sessions: what the detector sees when a harness logs tool names alone.

` + demoNote + `

Example:
  pedigree trajectory generate --sessions 2000 --seed 2 > test.jsonl
  pedigree trajectory eval test.jsonl --tools testdata/trajectory/tools.yaml`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cat, err := a.catalog(tools)
			if err != nil {
				return err
			}
			ss, err := readSessions(args[0])
			if err != nil {
				return err
			}
			var m *trajectory.Model
			if model != "" {
				if m, err = trajectory.LoadModel(model); err != nil {
					return err
				}
			}
			measure := func(mapper offline.Mapper) (evalFigures, error) {
				f := evalFigures{Rules: offline.EvaluateRules(ss, mapper)}
				if m != nil {
					got := offline.EvaluateModel(m, ss, mapper)
					f.Model = &got
					return f, nil
				}
				got, err := offline.CrossValidate(ss, mapper, folds, seed, trajectory.TrainOptions{})
				f.ModelCV = &got
				return f, err
			}
			full, err := measure(cat.TrajectoryCall)
			if err != nil {
				return err
			}
			r := full.Rules
			out := evalOutput{Version: 1, Sessions: r.Sessions, Attack: r.Attack, Benign: r.Benign,
				AUC: r.AUC, Recall: r.Recall, FPR: r.FPR, Arguments: offline.HasArguments(ss), evalFigures: full}
			if m == nil {
				out.Folds = folds
			}
			if out.Arguments {
				so, err := measure(offline.StructureOnly(cat.TrajectoryCall))
				if err != nil {
					return err
				}
				out.StructureOnly = &so
			}
			return a.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "%d sessions (%d attack, %d benign)\n", r.Sessions, r.Attack, r.Benign)
				lines := func(prefix string, f evalFigures) {
					line := func(name string, m offline.Metrics) {
						fmt.Fprintf(w, "%-40s AUC %.3f  recall %.3f  false-positive rate %.3f\n", prefix+name, m.AUC, m.Recall, m.FPR)
					}
					line("rules", f.Rules)
					if f.Model != nil {
						line("model", *f.Model)
					}
					if f.ModelCV != nil {
						line(fmt.Sprintf("model (%d-fold CV)", folds), *f.ModelCV)
					}
				}
				lines("", full)
				if out.StructureOnly != nil {
					lines("structure only: ", *out.StructureOnly)
				} else {
					fmt.Fprintln(w, "(no call carries arguments: every figure above is structure only)")
				}
			})
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "a trained model to measure")
	cmd.Flags().StringSliceVar(&tools, "tools", nil, "tool catalog files, merged (default DIR/tools.yaml)")
	cmd.Flags().IntVar(&folds, "folds", 5, "folds for cross-validation")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the fold shuffle")
	return cmd
}

func newTrajectoryGenerate(a *app) *cobra.Command {
	var o offline.GenerateOptions
	cmd := &cobra.Command{
		Use:   "generate [--sessions N] [--seed S] [--attack-share F]",
		Short: "Write synthetic labelled sessions (JSON Lines) to measure the detector",
		Long: `Write labelled sessions for the tools of testdata/trajectory/tools.yaml: benign
agents that ground themselves (recall, then send, some to external recipients the
user asked for) and attacks that overlap with them or hide among other calls.
Sends log their recipients in the shapes real harnesses use: one address,
"Name <addr>", a list, a comma- or semicolon-separated string, names without
addresses, mixed internal and external recipients, or no arguments at all.
Train on one seed and report on another. The sessions are synthetic: figures
on them say how the detector behaves on this generator, not on real traffic.

Example:
  pedigree trajectory generate --sessions 2000 --seed 1 > train.jsonl`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Sessions <= 0 {
				return usagef("--sessions must be positive")
			}
			if !(o.AttackShare >= 0 && o.AttackShare <= 1) {
				return usagef("--attack-share must be in [0, 1], not %v", o.AttackShare)
			}
			enc := jsonLines(a.out)
			for _, s := range offline.Generate(o) {
				if err := enc.Encode(s); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Sessions, "sessions", 1000, "how many sessions")
	cmd.Flags().Uint64Var(&o.Seed, "seed", 1, "random seed")
	cmd.Flags().Float64Var(&o.AttackShare, "attack-share", 0.5, "share of attack sessions")
	return cmd
}
