package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
)

// app is what every verb shares: the global flags and the writers.
type app struct {
	dir    string
	output string
	// lockWait is how long to wait for a data directory another process holds.
	lockWait time.Duration
	// trustRoot is --trust-root (see keys.go).
	trustRoot string
	in        io.Reader
	out       io.Writer
	errw      io.Writer
	// clock is the engine clock; tests set it.
	clock func() time.Time
	// getenv reads the environment; tests set it.
	getenv func(string) string
	// autostart lets the hook start a server on demand (see ondemand.go):
	// the command sets it; tests that run verbs in process do not, unless
	// they mean to, with executable the pedigree binary to start.
	autostart  bool
	executable string
}

// self is the pedigree binary to start again (a server on demand, a
// bench run): executable when set, else this process's own.
func (a *app) self() (string, error) {
	if a.executable != "" {
		return a.executable, nil
	}
	return os.Executable()
}

// Main runs the command and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{in: stdin, out: stdout, errw: stderr, clock: time.Now, getenv: os.Getenv, autostart: true}
	return a.run(context.Background(), args)
}

func (a *app) run(ctx context.Context, args []string) int {
	// A PKCS#11 token a command logged in to is logged out of when it ends.
	defer registry.ClosePKCS11()
	root := NewRootCommand(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		err = classify(err)
		var v verdictError
		if !errors.As(err, &v) {
			msg := err.Error()
			if h := hint(err); h != "" {
				msg += ": " + h
			}
			if a.output == "json" {
				b, _ := json.Marshal(errorOutput{v: v1, Error: msg, ExitCode: exitCode(err)})
				fmt.Fprintln(a.out, string(b))
			}
			// An error may quote what it refused (a tool name, a key):
			// shown escaped, like every text output.
			safeText(a.errw, func(w io.Writer) { fmt.Fprintln(w, "pedigree: "+msg) })
			if exitCode(err) == ExitUsage {
				fmt.Fprintln(a.errw, "Run 'pedigree --help' for usage.")
			}
		}
	}
	return exitCode(err)
}

// classify marks cobra's own complaints about the command line as usage errors.
func classify(err error) error {
	var u usageError
	if errors.As(err, &u) {
		return err
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "required flag", "accepts ", "requires at least", "invalid argument", "flag needs an argument", "bad flag syntax"} {
		if strings.Contains(msg, p) {
			return usageError{err}
		}
	}
	return err
}

// NewRootCommand builds the command tree.
func NewRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "pedigree",
		Short: "Lineage and provenance for agent memory, with a gate in front of sensitive tool calls",
		Long: `pedigree keeps LLM agents from acting on poisoned memory. Every entry is signed
by its principal and records what it was derived from; taint follows every strong
edge from an untrusted ancestor; and the gate asks, before a sensitive tool call,
whether anything the call relies on descends from content an untrusted party wrote.

Start with 'pedigree demo'.

` + exitCodesHelp + "\n\n" + examplesHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case a.output == "dot" && cmd.Annotations[outputDot] != "":
			case a.output == "dot":
				return usagef("--output dot is for 'lineage trace' only; %s takes text or json", cmd.CommandPath())
			case a.output != "text" && a.output != "json":
				return usagef("--output must be text or json (or dot, for 'lineage trace'), not %q", a.output)
			}
			if a.dir == "" {
				a.dir = a.getenv("PEDIGREE_DIR")
			}
			if a.dir == "" {
				a.dir = ".pedigree"
			}
			if a.lockWait < 0 {
				return usagef("--lock-wait must not be negative, not %v", a.lockWait)
			}
			return nil
		},
	}
	root.SetIn(a.in)
	root.SetOut(a.out)
	root.SetErr(a.errw)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&a.dir, "dir", "", "data directory (default $PEDIGREE_DIR, else ./.pedigree)")
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "text", "output format: text or json (lineage trace: also dot)")
	root.PersistentFlags().DurationVar(&a.lockWait, "lock-wait", DefaultLockWait, "how long to wait for a data directory another pedigree process holds (without 'pedigree serve', one process at a time)")
	root.PersistentFlags().StringVar(&a.trustRoot, "trust-root", "", "the operator public key (PEM) or freeze digest (hex) the store must match (default $PEDIGREE_TRUST_ROOT, else the keys directory's operator-<h>.pub)")
	root.SetHelpTemplate(root.HelpTemplate())
	root.AddCommand(
		newInitCommand(a), newRegistryCommand(a), newRecordCommand(a), newRecallCommand(a),
		newGateCommand(a), newLineageCommand(a), newVerifyCommand(a), newTrajectoryCommand(a),
		newReplayCommand(a), newDemoCommand(a), newBenchCommand(a), newLogCommand(a), newServeCommand(a), newMCPCommand(a),
		newHookCommand(a), newPlanCommand(a), newClaudeCommand(a), newUICommand(a), newWitnessCommand(a),
	)
	addExamples(root)
	walk(root, refuseUnknownVerbs)
	return root
}

// groupOnly marks a command that only groups verbs: it runs only to say
// that a verb is unknown, and has no example of its own.
const groupOnly = "pedigree/group"

// refuseUnknownVerbs makes a mistyped verb under a group ('pedigree gate
// chek') a usage error with a suggestion, as cobra makes it at the top
// level; a group run alone prints its help.
func refuseUnknownVerbs(c *cobra.Command) {
	if !c.HasParent() || !c.HasSubCommands() {
		return
	}
	c.SuggestionsMinimumDistance = 2
	unknown := func(c *cobra.Command, arg string) error {
		msg := fmt.Sprintf("unknown command %q for %q", arg, c.CommandPath())
		if s := c.SuggestionsFor(arg); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		return usageError{errors.New(msg)}
	}
	if c.Runnable() {
		// A verb that is also a group ('hook claude'): its own arguments
		// are checked first, and a stray word may be a mistyped verb.
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if len(a) > 0 && len(cmd.SuggestionsFor(a[0])) > 0 {
				return unknown(cmd, a[0])
			}
			if args == nil {
				return nil
			}
			return args(cmd, a)
		}
		return
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[groupOnly] = "yes"
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, a []string) error {
		if len(a) == 0 {
			return cmd.Help()
		}
		return unknown(cmd, a[0])
	}
}

// args checks a verb's positional arguments as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("want at least %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// open opens the data directory, pinned to the trust root when one is,
// waiting up to --lock-wait for another process to release it.
func (a *app) open(ctx context.Context, opts ...pedigree.Option) (e *pedigree.Engine, err error) {
	err = a.waitForDirectory(ctx, func() error {
		e, err = a.openOnce(ctx, opts...)
		return err
	})
	return e, err
}

// openOnce opens the data directory, pinned to the trust root when one is,
// or fails at once.
func (a *app) openOnce(ctx context.Context, opts ...pedigree.Option) (*pedigree.Engine, error) {
	root, err := a.trustRootOption()
	if err != nil {
		return nil, err
	}
	opts = append(append(append([]pedigree.Option{pedigree.WithClock(a.clock)}, a.storeKeys()...), root...), opts...)
	return pedigree.Open(ctx, a.dir, opts...)
}

// backendAs opens the backend and loads the key that signs as principal
// as (see signer); the backend is closed again if the key is refused.
func (a *app) backendAs(ctx context.Context, as, keyFile string, opts ...pedigree.Option) (pedigree.Backend, *registry.Signer, error) {
	e, err := a.backend(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	s, err := a.signer(ctx, e, as, keyFile)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return e, s, nil
}

// signer loads --key and checks it is the key registered for --as, so that
// a wrong key is one clear sentence rather than a bad-signature refusal.
func (a *app) signer(ctx context.Context, b pedigree.Backend, as, keyFile string) (*registry.Signer, error) {
	if as == "" || keyFile == "" {
		return nil, usagef("--as PRINCIPAL and --key FILE are required")
	}
	reg, err := b.Registry(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := reg.Lookup(as)
	if !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, as)
	}
	s, err := registry.OpenSigner(ctx, keyFile, a.kmsTimeout())
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", registry.DisplayRef(keyFile), err)
	}
	if !s.Public().Equal(p.PublicKey) {
		name := filepath.Base(keyFile)
		if registry.IsKMSRef(keyFile) {
			name = registry.DisplayRef(keyFile)
		}
		return nil, fmt.Errorf("%w: %s is not the key registered for %s", registry.ErrBadKey, name, as)
	}
	return s, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// jsonLines encodes one compact JSON value a line.
func jsonLines(w io.Writer) *json.Encoder { return json.NewEncoder(w) }
