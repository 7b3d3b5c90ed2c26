package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
)

// runtimeDir is where a socket goes whose data directory's path is too
// long for one: $XDG_RUNTIME_DIR/pedigree, else /tmp/pedigree-UID.
func (a *app) runtimeDir() string {
	return server.DefaultRuntimeDir(a.getenv("XDG_RUNTIME_DIR"))
}

func newServeCommand(a *app) *cobra.Command {
	var socket, addr string
	var claudeHooks, withUI bool
	var uiApprover, uiApproverKey string
	var fl fleetFlags
	var g gateOptions
	var mem memoryLimit
	var idleExit time.Duration
	cmd := &cobra.Command{
		Use:   "serve [--socket PATH] [--addr 127.0.0.1:PORT] [--policies DIR] [--tools FILE] [--claude-hooks] [--nats URL]",
		Short: "Run the sidecar server: HTTP/JSON on a unix socket (and loopback TCP)",
		Long: `Open the data directory and serve it over HTTP/JSON on a unix socket (default
DIR/pedigree.sock, mode 0600; when that path is longer than a unix socket path may
be, 107 bytes, a socket named for the directory in $XDG_RUNTIME_DIR/pedigree, else
/tmp/pedigree-UID, mode 0700; DIR/serve.json says where) and, with --addr, on a
loopback TCP address. A socket that cannot be bound stops the start. Badger
lets one process hold a data directory; while the server runs, every pedigree verb
on the directory talks to it through the socket, with the same output and exit
codes.

Every request (but /healthz and /readyz) must carry the bearer token that serve
writes to DIR/serve.token (mode 0600, new at each start): Authorization: Bearer
TOKEN. A request with an Origin header (a browser), a Host that is not loopback, or
a body that is not Content-Type: application/json is refused, on the socket and on
TCP alike. The CLI trusts the server that DIR/serve.json names only when its socket
is in DIR, is this user's with mode 0600, and the server proves it holds the token
(HMAC of a nonce) before anything else is sent; otherwise it stops with an error.

  TOKEN=$(cat "$PEDIGREE_DIR/serve.token")
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:7070/v1/registry

Clients sign entries, calls and approvals with their own keys; the server verifies
them against the frozen registry and holds no principal's private key, except with
--claude-hooks: then POST /v1/hooks/claude answers Claude Code's http hooks (see
'pedigree hook claude --help'), signing with the keys 'hook claude init' wrote, for
requests that carry DIR/hook-keys/http-token as a bearer token. No
endpoint changes the registry. Endpoints: /healthz, /readyz, /metrics (Prometheus),
and under /v1: registry, context, resolve, entries, recall, check, approvals,
decisions, trace, verify, trajectory, log, hooks/claude.

SIGTERM or SIGINT drains: new connections are refused, requests in flight finish,
and the store closes cleanly. Logs are JSON lines on stderr.

--idle-exit DURATION stops the server once no request has come for that long, or
once DIR/serve.json is removed (serve.json says idle_exit), and logs only warnings
and errors. The Claude Code hook starts its server this way, on demand; a verb
that needs the store itself, another 'pedigree serve', 'pedigree ui' and a gateway
stop such a server (the process that holds its socket, as the kernel names it)
rather than refuse or go through it.

With --nats, the directory is a node of a fleet that shares one lineage graph on
NATS JetStream: every write goes to the fleet's replicated stream, and the node
applies the stream, in order and verifying every record, into its store. The
stream's first record is the frozen registry: serve a frozen directory with no
entries first (it seeds the stream), then start other nodes on empty
directories with --trust-root, the operator's public key. /readyz fails
while the node lags, is cut off, or its stream is gone; /metrics has
pedigree_fleet_* series. --nats-creds FILE (a NATS credentials file, mode
0600) authenticates the node to external servers; --nats-ca FILE makes the link
TLS only (the servers' certificates must chain to it), and --nats-cert and
--nats-key give the node a client certificate. Every record a node publishes
is signed by its engine key (--engine-key FILE, default the keys directory's),
whose public half is registered as engine:<node> (tier external) in the seed
directory before it is frozen; every node refuses records no such key signed,
and a node whose key is not registered is not let in. Records are bound to
their place in the stream: every node checkpoints the stream's running hash,
signed, every 64 records it publishes, every 5 seconds, and at once after an
approval's use, keeps the latest checkpoint it verified in the keys directory
(fleet-witness-<h>.json), and stops (not ready, no writes) at a stream that
disagrees with a checkpoint or ends before its witness: one rewritten by whoever
may delete it.
--nats embedded runs a one-server NATS in DIR/nats (one replica: a trial on one
machine, no fault tolerance) that takes only the user and password kept in the
keys directory (nats-<h>.json, 0600, made at first start). A second node joins with:
  pedigree --dir /srv/node2 serve --nats nats://10.0.0.1:4222,nats://10.0.0.2:4222 --trust-root operator.pub`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addr != "" {
				if err := server.CheckLoopback(addr); err != nil {
					return usagef("%v", err)
				}
			}
			if len(socket) > server.MaxSocketPath {
				return usagef("--socket %s is %d bytes, and a unix socket path may have at most %d", socket, len(socket), server.MaxSocketPath)
			}
			if err := g.check(); err != nil {
				return err
			}
			if (uiApprover == "") != (uiApproverKey == "") {
				return usagef("--ui-approver and --ui-approver-key go together")
			}
			if uiApprover != "" && !withUI {
				return usagef("--ui-approver is for the page: add --ui")
			}
			if err := mem.apply(cmd); err != nil {
				return err
			}
			if idleExit < 0 {
				return usagef("--idle-exit %s: a duration of zero (never) or more", idleExit)
			}
			if idleExit > 0 && fl.url != "" {
				return usagef("--idle-exit is for a server started on demand; a fleet node (--nats) serves until it is stopped")
			}
			// A server on demand logs warnings and errors alone: its log
			// (DIR/serve.log) would otherwise grow by a line a request for
			// as long as the hook is used.
			var logOpts *slog.HandlerOptions
			if idleExit > 0 {
				logOpts = &slog.HandlerOptions{Level: slog.LevelWarn}
			}
			log := slog.New(slog.NewJSONHandler(a.errw, logOpts))
			// A server the hook started on demand gives way to one a person
			// starts; never to another on demand (two first events at once
			// start two, and the second must not stop the first).
			if idleExit > 0 {
				// On demand, a directory held by another process is not
				// waited for: it is another server (the hook finds it) or
				// a verb (the hook waits for the store itself).
				a.lockWait = 0
			}
			if idleExit == 0 {
				if err := server.StopOnDemand(cmd.Context(), a.dir, a.clock); err != nil && !errors.Is(err, server.ErrNoServer) && !errors.Is(err, server.ErrNotOnDemand) {
					return err
				}
			}
			if c, err := server.Dial(cmd.Context(), a.dir, a.clock); err == nil {
				c.Close()
				return fmt.Errorf("%w (%s): one server per data directory", errServed, a.dir)
			} else if errors.Is(err, server.ErrOtherRelease) {
				return fmt.Errorf("%w (%s): one server per data directory; %w", errServed, a.dir, err)
			}
			opts := append(g.options(), pedigree.WithLogger(log))
			var e *pedigree.Engine
			var err error
			if fl.url != "" {
				var stopNATS func()
				e, stopNATS, err = fl.join(cmd.Context(), a, opts)
				if stopNATS != nil {
					defer stopNATS()
				}
			} else {
				e, err = a.open(cmd.Context(), opts...)
			}
			var held errStillLocked
			if errors.As(err, &held) {
				held.serving = true
				return held
			}
			if err != nil {
				return err
			}
			var uiOpts *server.UIOptions
			if withUI {
				uiOpts = &server.UIOptions{}
				if uiApprover != "" {
					s, err := a.signer(cmd.Context(), e, uiApprover, uiApproverKey)
					if err != nil {
						e.Close()
						return err
					}
					uiOpts.Approver, uiOpts.ApproverKey = uiApprover, s
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			err = server.Run(ctx, e, server.Options{Socket: socket, RuntimeDir: a.runtimeDir(), Addr: addr, Log: log, ClaudeHooks: claudeHooks, UI: uiOpts, IdleExit: idleExit, Ready: func(s, t string) {
				if a.output == "json" {
					a.printJSON(serveOutput{v: v1, Socket: s, Addr: t})
					return
				}
				fmt.Fprintf(a.out, "serving %s on %s", a.dir, s)
				if t != "" {
					fmt.Fprintf(a.out, " and http://%s", t)
				}
				fmt.Fprintln(a.out)
			}})
			if errors.Is(err, server.ErrDirectoryGone) {
				// Nothing is left to close into: the process ends.
				return nil
			}
			if cerr := e.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket path (default DIR/pedigree.sock, or a per-user runtime directory when that is too long)")
	cmd.Flags().DurationVar(&idleExit, "idle-exit", 0, "stop once no request has come for this long (0: never); the hook starts its server with --idle-exit 30m, and a verb that needs the store stops such a server instead of refusing")
	cmd.Flags().StringVar(&addr, "addr", "", "also listen on this loopback TCP address")
	fl.add(cmd)
	cmd.Flags().BoolVar(&claudeHooks, "claude-hooks", false, "answer Claude Code's http hooks on POST /v1/hooks/claude, signing with DIR/hook-keys")
	cmd.Flags().BoolVar(&withUI, "ui", false, "serve the page for people on the loopback TCP listener (--addr, default 127.0.0.1 on a free port); open it with 'pedigree ui'")
	cmd.Flags().StringVar(&uiApprover, "ui-approver", "", "the principal (user tier, approval authority) whose key signs what is approved or rejected on the page")
	cmd.Flags().StringVar(&uiApproverKey, "ui-approver-key", "", "that principal's private key (a file, or a KMS or PKCS#11 key reference); without it the page shows the command to run")
	g.add(cmd)
	mem.add(cmd)
	return cmd
}
