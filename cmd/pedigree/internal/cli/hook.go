package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/registry"
)

func newHookCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Hooks of coding agents (Claude Code)",
		Args:  noArgs,
	}
	cmd.AddCommand(newHookClaude(a))
	return cmd
}

// hookLockWait bounds how long an event waits for a store that another
// process (another hook, run in parallel by Claude Code) holds.
const hookLockWait = 5 * time.Second

func newHookClaude(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claude",
		Short: "Answer one Claude Code hook event (JSON on stdin)",
		Long: `Read one Claude Code hook event (JSON) on stdin and answer on stdout.

  UserPromptSubmit  the prompt is recorded as the user's entry in session session_id,
                    and each @-mentioned file as the Read tool's output
  PreToolUse        a gate check of the call, by the agent's principal, justified by
                    the session's context; answers deny or ask with the reason, the
                    decision ID and what to run to approve; prints nothing when the
                    gate allows (Claude Code's own permissions then apply)
  PostToolUse       tool_response is recorded as a tool_output entry signed by the
                    tool's principal, derived from the call its PreToolUse checked;
                    after an asked call ran, the user's approval is recorded too.
                    Where the content came from decides the principal: what the
                    agent wrote itself (Write, Edit, a memory or file server's write)
                    is found again by digest; a file of a trusted workspace (see
                    trust-workspace), and a local command or search reading only
                    it, is the workspace's; a call to pedigree's MCP gateway is
                    the gateway's record, in the same session
  SessionStart/End  accepted; nothing is recorded (a resumed session keeps its context)

Exit 0, or 2 with the reason on stderr on any error (malformed input, an unknown
event, a store error): Claude Code blocks on 2 and lets the call through on any
other code, so there is no other. When 'pedigree serve' (or a gateway) runs on the
directory the event goes through it. Otherwise the first event starts one in the
background, 'pedigree serve --idle-exit 30m' (its log DIR/serve.log), and this
and later events go through it: opening the store is most of what an event costs.
It stops after 30 minutes without an event, when its directory is removed, or
when a verb that needs the store itself (registry, mcp add, init) stops it; the
next event starts another. With PEDIGREE_HOOK_SERVE=off, or when it cannot start,
the event opens the store itself, waiting up to 5 s when another process holds
it.

Set up in one command with 'pedigree claude install' (undo: 'pedigree claude
uninstall'); or by hand with 'pedigree hook claude init', then 'pedigree registry
freeze', then the block 'pedigree hook claude settings' prints, merged into
.claude/settings.json.

  echo '{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"hi"}' | pedigree hook claude`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ans, err := a.hookEvent(cmd.Context())
			if err != nil {
				safeText(a.errw, func(w io.Writer) { fmt.Fprintln(w, "pedigree: "+err.Error()) })
				return verdictError{code: ExitUsage, msg: err.Error()}
			}
			if ans != nil {
				return jsonLines(a.out).Encode(ans)
			}
			return nil
		},
	}
	cmd.AddCommand(newHookClaudeInit(a), newHookClaudeSettings(a), newHookClaudeTrustWorkspace(a))
	return cmd
}

// hookEvent reads and answers one event.
func (a *app) hookEvent(ctx context.Context) (*hook.Answer, error) {
	ev, err := hook.ReadEvent(a.in)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(a.dir)
	if err != nil {
		return nil, err
	}
	ans, err := a.answer(ctx, ev, dir)
	if errors.Is(err, server.ErrServerGone) {
		// The server stopped during the event: a gateway or a verb took
		// the directory from a server on demand. Once more, through
		// whoever holds it now. The hook takes an event delivered twice
		// (an output recorded already is found, a check is made again).
		ans, err = a.answer(ctx, ev, dir)
	}
	return ans, err
}

func (a *app) answer(ctx context.Context, ev *hook.Event, dir string) (*hook.Answer, error) {
	var b pedigree.Backend
	if c := a.serveOnDemand(ctx); c != nil {
		// Held to the trust root as a.backend holds any server it dials.
		if err := a.checkServedRoot(ctx, c); err != nil {
			c.Close()
			return nil, err
		}
		b = c
	} else {
		var err error
		if b, err = a.backendWaiting(ctx, hookLockWait); err != nil {
			return nil, err
		}
	}
	defer b.Close()
	h, err := hook.New(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	return h.Handle(ctx, ev)
}

// backendWaiting opens the backend, retrying while another process holds
// the store, for up to wait (real time, not the engine's clock).
func (a *app) backendWaiting(ctx context.Context, wait time.Duration) (pedigree.Backend, error) {
	deadline := time.Now().Add(wait)
	delay := 10 * time.Millisecond
	for {
		b, err := a.backend(ctx)
		if err == nil || !errors.Is(err, pedigree.ErrLocked) {
			return b, err
		}
		if time.Now().Add(delay).After(deadline) {
			return nil, fmt.Errorf("%w (waited %s)", err, wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

func newHookClaudeInit(a *app) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "init [--user PRINCIPAL]",
		Short: "Register the principals the Claude Code hook signs for (before freeze)",
		Long: `Register the principals the hook signs for, write their private keys into
DIR/hook-keys/ (mode 0600), merge the hook's tool catalog entries into DIR/tools.yaml,
and write the mapping DIR/claude-hook.yaml (Claude Code tool name -> the principal
that signs its output). Run it before 'pedigree registry freeze'.

  --user (default user:claude)  the user's prompts and approvals     tier user, approver
  agent:claude-code             every proposed call                  tier internal
  tool:claude-web               WebFetch, WebSearch output           tier external
  tool:claude-mcp               every MCP tool's output              tier external
  tool:claude-local             Read, Grep, Glob, Bash, Edit... and  tier unverified
                                every other tool's output
  repo:claude-workspace-user,   the files of a workspace declared    tier user,
  repo:claude-workspace-internal  with 'hook claude trust-workspace'   internal

tools.yaml: Bash, Write, Edit, MultiEdit, NotebookEdit and WebFetch are sensitive (ask
when the context is untrusted); Read, Grep, Glob, LS, WebSearch, TodoWrite, Task are
not; MCP tools are not listed, so they are sensitive (deny when untrusted). An entry
already in tools.yaml that differs from the hook's is refused, and nothing is written.

  pedigree init && pedigree hook claude init && pedigree registry freeze`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := registry.ValidateID(user); err != nil {
				return usageError{fmt.Errorf("--user: %w", err)}
			}
			e, err := a.openStore(cmd.Context(), "set up the hook")
			if err != nil {
				return err
			}
			defer e.Close()
			m := hook.DefaultMapping(user)
			if err := hook.Init(cmd.Context(), e, m); err != nil {
				return err
			}
			type principal struct {
				ID   string `json:"id"`
				Tier string `json:"tier"`
				Key  string `json:"key"`
			}
			var ps []principal
			for id, p := range m.Principals {
				ps = append(ps, principal{id, p.Tier, filepath.Join(a.dir, p.Key)})
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
			out := struct {
				Version    int         `json:"version"`
				Principals []principal `json:"principals"`
				Mapping    string      `json:"mapping"`
				Tools      string      `json:"tools"`
			}{1, ps, filepath.Join(a.dir, hook.MappingFile), filepath.Join(a.dir, pedigree.ToolsFile)}
			return a.print(out, func(w io.Writer) {
				for _, p := range ps {
					fmt.Fprintf(w, "registered %-20s %-10s key %s\n", p.ID, p.Tier, p.Key)
				}
				fmt.Fprintf(w, "mapping: %s\ncatalog: %s\nnext: pedigree registry freeze, then paste 'pedigree hook claude settings' into .claude/settings.json\n", out.Mapping, out.Tools)
			})
		},
	}
	cmd.Flags().StringVar(&user, "user", hook.DefaultUser, "the principal of the person at Claude Code's prompt (tier user)")
	return cmd
}

func newHookClaudeSettings(a *app) *cobra.Command {
	var command, url string
	cmd := &cobra.Command{
		Use:   "settings [--command PATH] [--http URL]",
		Short: "Print the settings.json \"hooks\" block that runs the hook",
		Long: `Print the "hooks" block to paste into Claude Code's settings (.claude/settings.json
or ~/.claude/settings.json): UserPromptSubmit, PreToolUse and PostToolUse (every tool,
MCP tools included) and SessionStart run 'pedigree --dir DIR hook claude', with DIR
absolute. --command names the pedigree binary (default: this one). Claude Code goes on
without a hook that fails with any exit code but 2 (a missing binary too), so each
command ends in '|| exit 2': whatever stops the hook from answering blocks the event.

--http URL prints http hooks instead, posting to a running 'pedigree serve --addr
127.0.0.1:PORT --claude-hooks' at URL (http://127.0.0.1:PORT/v1/hooks/claude), with
the bearer token from DIR/hook-keys/http-token.

  pedigree hook claude settings > hooks.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := filepath.Abs(a.dir)
			if err != nil {
				return err
			}
			if url != "" {
				if u, err := neturl.Parse(url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usagef("--http %q: want the URL of 'pedigree serve --claude-hooks', like http://127.0.0.1:7070/v1/hooks/claude", url)
				}
				token, err := hook.Token(dir)
				if err != nil {
					return err
				}
				_, err = a.out.Write(hook.HTTPSettings(url, token).JSON())
				return err
			}
			if command == "" {
				if command, err = os.Executable(); err != nil {
					return err
				}
				if strings.Contains(command, string(filepath.Separator)+"go-build") {
					return usagef("this pedigree is a temporary build ('go run'): install it and pass --command PATH")
				}
			}
			_, err = a.out.Write(hook.CommandSettings(hook.ShellQuote(command) + " --dir " + hook.ShellQuote(dir) + " hook claude").JSON())
			return err
		},
	}
	cmd.Flags().StringVar(&command, "command", "", "the pedigree binary the hooks run (default: this one)")
	cmd.Flags().StringVar(&url, "http", "", "print http hooks posting to this URL of 'pedigree serve'")
	return cmd
}
