package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

func newMCPCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "The MCP gateway: pedigree in front of an agent's MCP servers",
		Long: `The MCP gateway is one MCP server in front of every MCP server an agent host uses.
It records each call and result as signed entries, follows memory written through
the reference memory server into later sessions, gates sensitive calls, and asks
the human through the host when the policy says ask.

One line, with nothing set up: in the host's mcpServers entry, put 'pedigree mcp run --'
in front of the server's command (see 'pedigree mcp run --help' for what it decides):
  claude mcp add memory -- pedigree mcp run -- node /opt/mcp/server-memory/dist/index.js

By hand, deciding tiers, the catalog and the approver yourself (before 'registry freeze'):
  export PEDIGREE_DIR=~/.local/share/pedigree/gateway
  pedigree init
  pedigree registry add user:alice --tier user --new-key ~/.config/pedigree/keys/alice.key --approver
  pedigree mcp add fs --tier external -- node /opt/mcp/server-filesystem/dist/index.js ~/work
  pedigree mcp add mem --tier internal -- npx --no-install @modelcontextprotocol/server-memory
  $EDITOR "$PEDIGREE_DIR/tools.yaml"      # the drafted catalog entries
  pedigree registry freeze
Then point the host at: pedigree --dir "$PEDIGREE_DIR" mcp run --approver user:alice
--approver-key ~/.config/pedigree/keys/alice.key

Upstream commands should be installed ones (node .../dist/index.js, an installed
binary, 'npx --no-install'): 'npx -y', 'uvx' and the like ask a registry at every
start, and hang offline; 'mcp add' warns about them.`,
		Args: noArgs,
	}
	cmd.AddCommand(newMCPAdd(a), newMCPList(a), newMCPUpdate(a), newMCPRun(a), newMCPImportMemory(a))
	return cmd
}

// mcpAddOutput is what mcp add prints with -o json.
type mcpAddOutput struct {
	Version      int      `json:"version"`
	Name         string   `json:"name"`
	Principal    string   `json:"principal"`
	Tier         string   `json:"tier"`
	Memory       bool     `json:"memory"`
	Tools        []string `json:"tools"`
	CatalogAdded []string `json:"catalog_added"`
	Registered   []string `json:"registered"`
	// Flagged is metadata that reads like instructions to the model:
	// read it before sealing it.
	Flagged []gateway.Flag `json:"flagged"`
}

func newMCPAdd(a *app) *cobra.Command {
	var tier string
	var env []string
	cmd := &cobra.Command{
		Use:   "add NAME [--tier TIER] [--env K=V]... -- COMMAND [ARGS...]",
		Short: "Put an MCP server behind the gateway (before freeze)",
		Long: `Register an upstream MCP server: its tool principal tool:NAME at --tier (default
external) and, the first time, the gateway's own principals (agent:mcp, internal,
which signs calls and the agent's memory; tool:mcp-unverified, unverified, which
signs memory content of unknown provenance). Their private keys are kept in
DIR/mcp/keys (mode 0600); the command in DIR/mcp/upstreams.json.

The server is started once to read its tools, and a catalog entry is drafted for
each in DIR/tools.yaml under NAME.TOOL, from its annotations: readOnlyHint true is
not sensitive; anything else is sensitive, irreversible unless destructiveHint is
false, an external sink unless openWorldHint is false. Every tool of an external
server is an external sink. Review the drafts before freeze. Entries already in
the catalog are kept.

What the server says of itself (each tool's name, title, description, schemas and
annotations; its prompts, resources and resource templates) is kept in
upstreams.json, which freeze seals: the operator vouches for it, and listing it
records nothing. Metadata that reads like instructions to the model (<IMPORTANT>,
"before answering", "ignore previous", "call TOOL", hidden characters) is flagged:
read it before freeze. Whatever the server offers later that differs (a changed
description, a new tool) is recorded as the server's content in each session
that lists it, and 'mcp list' shows the difference.

Example:
  pedigree mcp add fs --tier external -- node server-filesystem/dist/index.js /home/me/work`,
		Args: minArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 1 {
				return usagef("want NAME -- COMMAND [ARGS...] (the command after --)")
			}
			name, command := args[0], args[1:]
			if err := gateway.ValidateName(name); err != nil {
				return usagef("%v", err)
			}
			t, err := registry.ParseTier(tier)
			if err != nil {
				return usagef("%v", err)
			}
			for _, kv := range env {
				if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
					return usagef("--env %q: want K=V", kv)
				}
			}
			e, err := a.openStore(cmd.Context(), "add an MCP server")
			if err != nil {
				return err
			}
			defer e.Close()
			if w := registryOnStart(command); w != "" {
				fmt.Fprintln(a.errw, "pedigree: warning: "+w)
			}
			out, err := a.addUpstream(cmd.Context(), e, gateway.Upstream{Name: name, Principal: "tool:" + name, Tier: t.String(), Command: command[0], Args: command[1:], Env: env}, true)
			if err != nil {
				return err
			}
			return a.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "added MCP server %s (%s, %s tier): %d tools", name, out.Principal, t, len(out.Tools))
				if out.Memory {
					fmt.Fprint(w, ", followed as a memory server")
				}
				fmt.Fprintln(w)
				if len(out.CatalogAdded) > 0 {
					fmt.Fprintf(w, "drafted %d catalog entries in %s (review them before freeze)\n", len(out.CatalogAdded), filepath.Join(a.dir, pedigree.ToolsFile))
				}
				if len(out.Flagged) > 0 {
					fmt.Fprintf(w, "read before freeze (freeze vouches for what the server says of itself): %d place(s) read like instructions to the model:\n", len(out.Flagged))
					for _, f := range out.Flagged {
						fmt.Fprintf(w, "  %s\n", f)
					}
				}
			})
		},
	}
	cmd.Flags().StringVar(&tier, "tier", "external", "the tier of what the server returns: internal, user, unverified or external")
	cmd.Flags().StringArrayVar(&env, "env", nil, "an environment variable for the server, K=V (repeatable)")
	return cmd
}

// addUpstream registers an upstream before freeze: it starts the server
// once to read its tools (nothing is registered for one that does not
// start), registers its principal and, the first time, the gateway's own,
// keeps the command and drafts catalog entries.
// addUpstream reads the upstream's tools and metadata, registers what it
// needs and drafts its catalog. vouchFlagged keeps metadata the scan flags
// in what the seal will vouch for (mcp add: the operator reads the flags
// before freeze); without it, flagged items are left out of the seal, so the
// gateway records them as the upstream's content wherever they are listed.
func (a *app) addUpstream(ctx context.Context, e *pedigree.Engine, up gateway.Upstream, vouchFlagged bool) (mcpAddOutput, error) {
	var out mcpAddOutput
	reg, err := e.Registry(ctx)
	if err != nil {
		return out, err
	}
	if reg.Frozen {
		return out, fmt.Errorf("%w: MCP servers are added before 'registry freeze'", registry.ErrFrozen)
	}
	t, err := registry.ParseTier(up.Tier)
	if err != nil {
		return out, err
	}
	cfg, err := gateway.LoadConfig(a.dir)
	if err != nil {
		return out, err
	}
	if _, dup := cfg.Find(up.Name); dup {
		return out, fmt.Errorf("%w: an MCP server called %s is already added", registry.ErrDuplicate, up.Name)
	}
	if _, dup := reg.Lookup(up.Principal); dup {
		return out, fmt.Errorf("%w: %s", registry.ErrDuplicate, up.Principal)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cs, tools, err := gateway.Connect(cctx, up, a.errw)
	if err != nil {
		return out, err
	}
	up.Metadata, err = gateway.ReadMetadata(cctx, cs, tools)
	cs.Close()
	if err != nil {
		return out, fmt.Errorf("upstream %s: %w", up.Name, err)
	}
	var known []string
	for _, o := range cfg.Upstreams {
		known = append(known, o.Tools...)
	}
	flagged := gateway.Suspicious(up.Metadata, known)
	if flagged == nil {
		flagged = []gateway.Flag{}
	}
	if !vouchFlagged {
		up.Metadata = up.Metadata.Without(flagged)
	}
	up.Memory = gateway.IsMemoryServer(tools)
	for _, tl := range tools {
		up.Tools = append(up.Tools, tl.Name)
	}
	var registered []string
	for _, p := range []registry.Principal{
		{ID: gateway.AgentPrincipal, Tier: registry.Internal},
		{ID: gateway.UnverifiedPrincipal, Tier: registry.Unverified},
		{ID: up.Principal, Tier: t},
	} {
		if _, ok := reg.Lookup(p.ID); ok {
			continue
		}
		if err := addGatewayPrincipal(ctx, e, a.dir, p); err != nil {
			return out, err
		}
		registered = append(registered, p.ID)
	}
	cfg.Upstreams = append(cfg.Upstreams, up)
	if err := cfg.Save(a.dir); err != nil {
		return out, err
	}
	added, err := gateway.MergeCatalog(filepath.Join(a.dir, pedigree.ToolsFile), gateway.Draft(up.Name, tools, up.Memory, t == registry.External))
	if err != nil {
		return out, err
	}
	return mcpAddOutput{Version: 1, Name: up.Name, Principal: up.Principal, Tier: t.String(), Memory: up.Memory,
		Tools: nonNilStrings(up.Tools), CatalogAdded: nonNilStrings(added), Registered: nonNilStrings(registered), Flagged: flagged}, nil
}

func nonNilStrings(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// addGatewayPrincipal makes a key for a principal the gateway signs for,
// keeps it in DIR/mcp/keys and registers its public half. No key is left
// for a principal that could not be registered.
func addGatewayPrincipal(ctx context.Context, e *pedigree.Engine, dir string, p registry.Principal) error {
	path := gateway.KeyPath(dir, p.ID)
	rel, err := filepath.Rel(dir, filepath.Dir(path))
	if err != nil {
		return err
	}
	if err := safefile.MkdirAll(dir, rel, 0o700); err != nil {
		return err
	}
	s, priv, err := registry.GenerateSigner(nil)
	if err != nil {
		return err
	}
	if err := registry.WritePrivateKeyFile(path, priv); err != nil {
		return err
	}
	p.PublicKey = s.Public()
	if err := e.Bootstrap().AddPrincipal(ctx, p); err != nil {
		safefile.Remove(filepath.Dir(path), filepath.Base(path), safefile.Regular)
		return err
	}
	return nil
}

type mcpListOutput struct {
	Version   int            `json:"version"`
	Upstreams []mcpListEntry `json:"upstreams"`
}

// mcpListEntry is an upstream with how what it offered when last run
// differs from the metadata sealed for it.
type mcpListEntry struct {
	gateway.Upstream
	// MetadataSealed: what the server said of itself at 'mcp add' is kept
	// (its text is in upstreams.json, not repeated here).
	MetadataSealed bool `json:"metadata_sealed"`
	// Differences: what a gateway saw it offer that the seal does not
	// vouch for (recorded as its content in each session), as of Seen.
	Differences []gateway.Change `json:"differences"`
	Seen        string           `json:"seen,omitempty"`
}

func newMCPList(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the MCP servers behind the gateway",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := gateway.LoadConfig(a.dir)
			if err != nil {
				return err
			}
			ups := []mcpListEntry{}
			for _, u := range cfg.Upstreams {
				e := mcpListEntry{Upstream: u, Differences: []gateway.Change{}}
				d, err := gateway.LoadDrift(a.dir, u.Name)
				if err != nil {
					return err
				}
				if d != nil {
					e.Differences, e.Seen = gateway.Diff(u.Metadata, d.Offered), d.Seen
				}
				e.MetadataSealed, e.Metadata = u.Metadata != nil, nil
				ups = append(ups, e)
			}
			return a.print(mcpListOutput{Version: 1, Upstreams: ups}, func(w io.Writer) {
				if len(ups) == 0 {
					fmt.Fprintln(w, "no MCP servers: add one with 'pedigree mcp add NAME -- COMMAND'")
				}
				for _, u := range ups {
					kind := ""
					if u.Memory {
						kind = ", memory"
					}
					fmt.Fprintf(w, "%s\t%s (%s%s)\t%d tools\t%s\n", u.Name, u.Principal, u.Tier, kind, len(u.Tools), strings.Join(append([]string{u.Command}, u.Args...), " "))
					if !u.MetadataSealed {
						fmt.Fprintln(w, "  no metadata sealed for it (added by an older pedigree): every listing of it is recorded as its content")
					}
					if len(u.Differences) > 0 {
						fmt.Fprintf(w, "  offers what the seal does not vouch for (seen %s; recorded as its content in each session):\n", u.Seen)
						for _, c := range u.Differences {
							fmt.Fprintf(w, "    %s\n", c)
						}
					}
				}
			})
		},
	}
}

// mcpUpdateOutput is what mcp update prints with -o json.
type mcpUpdateOutput struct {
	Version int              `json:"version"`
	Name    string           `json:"name"`
	Changes []gateway.Change `json:"changes"`
	Flagged []gateway.Flag   `json:"flagged"`
	// Seal says whether the operator must run 'registry seal' for the
	// gateway to run with it (after freeze).
	Seal bool `json:"seal"`
}

func newMCPUpdate(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "update NAME",
		Short: "Read again what an MCP server says of itself, for the operator to seal",
		Long: `Start the server once and keep what it says of itself now (its tools' names,
titles, descriptions, schemas and annotations; its prompts, resources and resource
templates) in DIR/mcp/upstreams.json, in place of what 'mcp add' read. It prints
what changed and flags what reads like instructions to the model: read them.

After freeze the seal no longer covers the file: nothing opens the data directory
until the operator runs 'pedigree registry seal', which vouches for what was read.
Until then, and for whatever the server offers that differs from the seal, each
session records the server's metadata as its content ('mcp list' shows it).
New tools get no catalog entry: the gate treats them as sensitive.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfg, err := gateway.LoadConfig(a.dir)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(cfg.Upstreams, func(u gateway.Upstream) bool { return u.Name == name })
			if i < 0 {
				return usagef("no MCP server called %s (see 'pedigree mcp list')", name)
			}
			up := cfg.Upstreams[i]
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			cs, tools, err := gateway.Connect(ctx, up, a.errw)
			if err != nil {
				return err
			}
			md, err := gateway.ReadMetadata(ctx, cs, tools)
			cs.Close()
			if err != nil {
				return fmt.Errorf("upstream %s: %w", name, err)
			}
			var known []string
			for _, o := range cfg.Upstreams {
				known = append(known, o.Tools...)
			}
			out := mcpUpdateOutput{Version: 1, Name: name, Changes: gateway.Diff(up.Metadata, md), Flagged: gateway.Suspicious(md, known)}
			if out.Flagged == nil {
				out.Flagged = []gateway.Flag{}
			}
			sealed, err := pedigree.SealedFiles(a.dir)
			if err != nil {
				return err
			}
			if len(out.Changes) > 0 {
				up.Metadata, up.Tools = md, nil
				for _, t := range tools {
					up.Tools = append(up.Tools, t.Name)
				}
				cfg.Upstreams[i] = up
				if err := cfg.Save(a.dir); err != nil {
					return err
				}
				_, statErr := os.Stat(filepath.Join(a.dir, pedigree.SealFile))
				out.Seal = statErr == nil && slices.Contains(sealed, pedigree.MCPConfigFile)
			}
			return a.print(out, func(w io.Writer) {
				if len(out.Changes) == 0 {
					fmt.Fprintf(w, "%s offers what is kept for it: nothing to update\n", name)
					return
				}
				fmt.Fprintf(w, "kept what %s says of itself now in %s:\n", name, filepath.Join(a.dir, pedigree.MCPConfigFile))
				for _, c := range out.Changes {
					fmt.Fprintf(w, "  %s\n", c)
				}
				for _, f := range out.Flagged {
					fmt.Fprintf(w, "  read this: %s\n", f)
				}
				if out.Seal {
					fmt.Fprintln(w, "the seal no longer covers it: read it, then run 'pedigree registry seal' to vouch for it")
				}
			})
		},
	}
}

func newMCPRun(a *app) *cobra.Command {
	var policies, mode, approver, approverKey, listen, name string
	var tools []string
	cmd := &cobra.Command{
		Use:   "run [--tools FILE] [--mode enforce|shadow] [--approver PRINCIPAL --approver-key FILE] [--listen 127.0.0.1:PORT] [-- COMMAND [ARGS...]]",
		Short: "Run the gateway: one MCP server on stdio in front of every added server",
		Long: `The one-line form, for an mcpServers entry on a machine where nothing is set up:

  pedigree mcp run -- node /opt/mcp/server-memory/dist/index.js

The first run makes a directory for that command (--dir, else $PEDIGREE_DIR,
else $XDG_DATA_HOME/pedigree/mcp/NAME-H, else ~/.local/share/pedigree/mcp/NAME-H,
NAME from the command or --name, H from the whole command line) with the operator
key in the keys directory (see 'pedigree init --help'), adds the command as 'mcp
add NAME' would at tier external (everything it returns is untrusted), drafts its
catalog from the tools' annotations, and freezes, which seals the catalog and the
command. It says on stderr where it put everything and what it decided. Later
runs serve what was sealed; a directory frozen without this command is refused.
No approver is set: a call the policy asks about is refused, with the 'gate
approve' command to run. To decide those things yourself, set the directory up
by hand (see 'pedigree mcp --help') and run 'mcp run' without a command.

Without a command, serve MCP on stdio (or streamable HTTP with --listen, with a
bearer token) in front of every server added with 'mcp add'. Tools keep their names when unique
across the servers, else become NAME__TOOL; their catalog keys are NAME.TOOL.

Each MCP session is a pedigree session: every tools/call is a call entry signed
by agent:mcp and justified by the session's context, checked by the gate;
every result is a tool_output entry signed by tool:NAME, derived from the call,
committed while the result goes back (the session's next request waits for it;
one that cannot be stored refuses the rest of the session). Resources, prompts,
progress, cancellation, resource subscriptions and completions pass through.
Whatever an upstream sends toward the host is recorded as its content first: a
result or its error, a resource, a prompt, a completion, a progress message, and
any tool, prompt or resource it lists that is not as the operator sealed it at
'mcp add' (that part is recorded in every session; 'mcp list' shows it). Its log
messages, elicitation and sampling requests are not passed on.
A denied call returns isError with text starting "pedigree denied" and
_meta["io.pedigree/decision"]. An ask elicits the human through the host; on
accept, an approval signed by --approver (a principal registered with 'registry
add ... --approver') is recorded and the call runs once.
Without elicitation, or on decline, the call is refused with the decision ID
and the 'gate approve' command. --mode shadow forwards everything and logs
what enforce would have decided.

The gateway holds --approver-key: whoever controls the host's elicitation
answers for that principal. Give it a principal of its own (user:alice-via-mcp)
if approvals through the host should be told apart from approvals by hand.

While it runs, other verbs and other gateways on the directory go through it
(it serves the directory as 'pedigree serve' does), or it goes through a
running 'pedigree serve'. Logs are JSON lines on stderr; stdout is MCP.

Examples (Claude Code):
  claude mcp add memory -- pedigree mcp run -- node /opt/mcp/server-memory/dist/index.js
  claude mcp add pedigree -- pedigree --dir ~/.local/share/pedigree/gateway mcp run \
      --approver user:alice --approver-key ~/.config/pedigree/keys/alice.key`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return usagef("unexpected argument %q: the upstream command of the one-line form goes after --", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, command []string) error {
			m, err := gateway.ParseMode(mode)
			if err != nil {
				return usagef("--mode: %v", err)
			}
			if (approver == "") != (approverKey == "") {
				return usagef("--approver and --approver-key go together")
			}
			if listen != "" {
				if err := server.CheckLoopback(listen); err != nil {
					return usagef("--listen: %v", err)
				}
			}
			if len(command) > 0 {
				if name == "" {
					name = upstreamName(command)
				} else if err := gateway.ValidateName(name); err != nil {
					return usagef("--name: %v", err)
				}
				if a.dir, err = a.oneLineDir(cmd.Flag("dir").Changed, name, command); err != nil {
					return err
				}
				if err := a.bootstrapOneLine(cmd.Context(), name, command); err != nil {
					return err
				}
			} else if name != "" {
				return usagef("--name names the upstream of the one-line form: pedigree mcp run --name NAME -- COMMAND")
			}
			cfg, err := gateway.LoadConfig(a.dir)
			if err != nil {
				return err
			}
			if len(cfg.Upstreams) == 0 {
				return errors.New("no MCP servers are added: run 'pedigree mcp add NAME -- COMMAND' before freeze, or use the one-line form 'pedigree mcp run -- COMMAND'")
			}
			// The log and every upstream's stderr share the one stderr.
			errw := &syncWriter{w: a.errw}
			log := slog.New(slog.NewJSONHandler(errw, nil))
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			b, done, err := a.gatewayBackend(ctx, log, gateOptions{policies: policies, tools: tools})
			if err != nil {
				return err
			}
			defer done()
			reg, err := b.Registry(ctx)
			if err != nil {
				return err
			}
			if !reg.Frozen {
				return registry.ErrNotFrozen
			}
			// What runs, and under which principal, is what the operator
			// sealed at freeze: the file is read again, against the seal.
			if cfg, err = gateway.LoadSealedConfig(a.dir, reg); err != nil {
				return err
			}
			o := gateway.Options{Backend: b, Mode: m, Log: log, Stderr: errw, Tools: map[string]*registry.Signer{}, Version: "dev",
				Drift: func(name string, now *gateway.Metadata, _ []gateway.Change) {
					// For 'mcp list': what it offered, against the seal.
					if err := gateway.SaveDrift(a.dir, name, now, a.clock()); err != nil {
						log.Warn("what an upstream offers could not be noted for 'mcp list'", "upstream", name, "error", err)
					}
				}}
			if o.Agent, err = a.gatewaySigner(ctx, b, gateway.AgentPrincipal); err != nil {
				return err
			}
			if o.Unverified, err = a.gatewaySigner(ctx, b, gateway.UnverifiedPrincipal); err != nil {
				return err
			}
			for _, u := range cfg.Upstreams {
				if o.Tools[u.Principal], err = a.gatewaySigner(ctx, b, u.Principal); err != nil {
					return err
				}
			}
			// The upstreams do not inherit what lets them use the
			// approver's key or the operator's (a PIN variable, the Vault
			// token): an upstream only feeds content.
			o.WithholdEnv = append(registry.CredentialEnv(approverKey), registry.CredentialEnv(a.getenv("PEDIGREE_OPERATOR_KEY"))...)
			who := "user:NAME --key FILE"
			if approver != "" {
				if o.Approver, err = a.signer(ctx, b, approver, approverKey); err != nil {
					return err
				}
				// Said at start, not only at the first approval a person
				// gives (which the engine refuses: the call stays denied).
				if p, _ := reg.Lookup(approver); !p.Approver || p.Tier != registry.User {
					log.Warn("the --approver holds no approval authority: every approval it signs will be refused (register a user-tier principal with 'registry add ... --approver')", "approver", approver)
				}
				o.ApproverID = approver
				// The key the gateway was started with: a command with
				// nothing left to fill in.
				k := registry.DisplayRef(approverKey)
				if !registry.IsKMSRef(approverKey) {
					if k, err = filepath.Abs(approverKey); err != nil {
						return err
					}
				}
				who = approver + " --key " + hook.ShellQuote(k)
			}
			dir, err := filepath.Abs(a.dir)
			if err != nil {
				return err
			}
			o.ApproveHint = fmt.Sprintf("pedigree --dir %s gate approve DECISION_ID --as %s", hook.ShellQuote(dir), who)
			o.PageHint = fmt.Sprintf("pedigree --dir %s ui --decision DECISION_ID", hook.ShellQuote(dir))
			// Behind Claude Code with the hook on this directory, a call
			// the hook checked is decided and recorded in its session.
			o.Bind = func(name string, canon []byte) string { return hook.GatewaySession(dir, name, canon) }
			g, err := gateway.New(ctx, cfg.Upstreams, o)
			if err != nil {
				return err
			}
			defer g.Close()
			if listen != "" {
				return a.serveMCPHTTP(ctx, g, listen, log)
			}
			return g.ServeStream(ctx, a.in, a.out)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&tools, "tools", nil, "tool catalog files, merged: FILE,... (default DIR/tools.yaml)")
	f.StringVar(&policies, "policies", "", "Rego directory that extends or replaces the default policy")
	f.StringVar(&mode, "mode", "enforce", "enforce (refuse and ask) or shadow (forward everything, log what enforce would do)")
	f.StringVar(&approver, "approver", "", "the user-tier principal that signs approvals given through the host")
	f.StringVar(&approverKey, "approver-key", "", "its private key: a file, or a KMS or PKCS#11 key reference (hashivault://NAME, pkcs11:..., see docs/keys.md)")
	f.StringVar(&listen, "listen", "", "serve streamable HTTP on this loopback address instead of stdio")
	f.StringVar(&name, "name", "", "the one-line form's upstream name (default: from the command)")
	return cmd
}

// gatewaySigner loads the key the gateway keeps for principal and checks it
// is the registered one.
func (a *app) gatewaySigner(ctx context.Context, b pedigree.Backend, principal string) (*registry.Signer, error) {
	path := gateway.KeyPath(a.dir, principal)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: the gateway's key for %s is not at %s: it is kept in the data directory (--dir, else $PEDIGREE_DIR), written by 'mcp add'", registry.ErrBadKey, principal, path)
	}
	return a.signer(ctx, b, principal, path)
}

// gatewayBackend goes through a running server when there is one;
// otherwise it opens the store and serves it on the directory's socket, as
// 'pedigree serve' does, so that other verbs and gateways find it.
func (a *app) gatewayBackend(ctx context.Context, log *slog.Logger, g gateOptions) (pedigree.Backend, func(), error) {
	for attempt := 0; ; attempt++ {
		// A server the hook started on demand stops when idle, and a
		// gateway lives as long as its session: the gateway holds the
		// directory itself, and the hook goes through it.
		if err := server.StopOnDemand(ctx, a.dir, a.clock); err != nil && !errors.Is(err, server.ErrNoServer) && !errors.Is(err, server.ErrNotOnDemand) {
			return nil, nil, err
		}
		c, err := server.Dial(ctx, a.dir, a.clock)
		if errors.Is(err, server.ErrOtherRelease) {
			return nil, nil, err // a person's server of another release: theirs to restart
		}
		if err == nil {
			if len(g.options()) > 0 {
				c.Close()
				return nil, nil, usagef("%v: --policies and --tools apply to the process that holds the directory (the first gateway, or 'pedigree serve'), not to one that goes through it", errServed)
			}
			return c, func() { c.Close() }, nil
		}
		e, err := a.open(ctx, append(g.options(), pedigree.WithLogger(log))...)
		if err != nil {
			// Another process may have opened it between our dial and
			// our open: try its server again, a few times.
			if attempt < 20 && strings.Contains(err.Error(), "lock") {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return nil, nil, err
		}
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		ready := make(chan struct{})
		served := make(chan error, 1)
		go func() {
			served <- server.Run(sctx, e, server.Options{Log: log, RuntimeDir: a.runtimeDir(), Ready: func(string, string) { close(ready) }})
		}()
		select {
		case <-ready:
		case err := <-served:
			// Never half-up: a gateway that holds the directory without
			// serving it leaves every hook beside it waiting for the store.
			cancel()
			e.Close()
			return nil, nil, fmt.Errorf("serving the data directory to other processes (hooks, verbs): %w", err)
		}
		return e, func() {
			cancel()
			<-served
			e.Close()
		}, nil
	}
}

// serveMCPHTTP serves the gateway as streamable HTTP on a loopback address,
// behind a bearer token (PEDIGREE_MCP_TOKEN, or a new one written to
// DIR/mcp/token, mode 0600).
func (a *app) serveMCPHTTP(ctx context.Context, g *gateway.Gateway, addr string, log *slog.Logger) error {
	token := a.getenv("PEDIGREE_MCP_TOKEN")
	if token == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		token = hex.EncodeToString(b)
		path := filepath.Join(a.dir, "mcp", "token")
		if err := safefile.WriteFile(a.dir, filepath.Join("mcp", "token"), []byte(token+"\n"), 0o600); err != nil {
			return err
		}
		log.Info("bearer token written", "file", path)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("serving MCP over streamable HTTP", "url", "http://"+l.Addr().String()+"/")
	return g.ServeHTTP(ctx, l, token)
}

// importOutput is what mcp import-memory prints with -o json.
type importOutput struct {
	Version   int    `json:"version"`
	Principal string `json:"principal"`
	Items     int    `json:"items"`
	Imported  int    `json:"imported"`
}

func newMCPImportMemory(a *app) *cobra.Command {
	var as, key string
	cmd := &cobra.Command{
		Use:   "import-memory FILE --as PRINCIPAL [--key FILE]",
		Short: "Adopt an existing memory server store, attributing it to a principal",
		Long: `Read a memory server's store (memory.jsonl, or a legacy memory.json) and record
each observation, entity and relation as a memory entry signed by PRINCIPAL, so
that reads through the gateway find their provenance instead of counting them as
unverified. --key defaults to the key the gateway keeps for PRINCIPAL.

Example:
  pedigree mcp import-memory ~/.local/memory.jsonl --as user:alice --key alice.key`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if as == "" {
				return usagef("--as PRINCIPAL is required")
			}
			if key == "" {
				key = gateway.KeyPath(a.dir, as)
			}
			raw, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			items, err := gateway.ParseMemoryFile(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			b, s, err := a.backendAs(cmd.Context(), as, key)
			if err != nil {
				return err
			}
			defer b.Close()
			n := 0
			for _, it := range items {
				if _, err := b.Record(cmd.Context(), s, pedigree.Entry{Principal: as, Kind: lineage.KindMemory, Content: []byte(it),
					StoreContent: true, Parents: []lineage.Parent{}}); err != nil {
					return fmt.Errorf("after %d of %d items: %w", n, len(items), err)
				}
				n++
			}
			return a.print(importOutput{Version: 1, Principal: as, Items: len(items), Imported: n}, func(w io.Writer) {
				fmt.Fprintf(w, "imported %d memory items as %s\n", n, as)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "the principal the memory is attributed to")
	cmd.Flags().StringVar(&key, "key", "", "its private key: a file or a KMS key reference (default: the gateway's key file for it)")
	return cmd
}

// syncWriter serialises writes from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
