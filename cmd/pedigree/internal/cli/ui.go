package cli

import (
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
)

type uiOutput struct {
	v
	URL     string `json:"url"`
	Started bool   `json:"started"`
}

func newUICommand(a *app) *cobra.Command {
	var open, start bool
	var decision string
	cmd := &cobra.Command{
		Use:   "ui [--open] [--decision ID]",
		Short: "Open the page where a person sees why a call was stopped, and decides",
		Long: `Print a one-time link to the page of the server that serves the data directory
(started with 'pedigree serve --ui'): the decisions waiting for a person, each
with its arguments whole and where each came from, Approve once and Reject
buttons, the ancestry of a decision or an entry as a picture, and the log.

The link works once and for two minutes: opening it sets a session cookie in
that browser (HttpOnly, SameSite=Strict) and the link is spent. Run the command
again for another browser. When no server runs on the directory, 'pedigree ui'
starts one in the background (its log goes to DIR/serve.log) unless --start=false.
With --open it also opens the link with xdg-open.

Approving on the page signs with the key the server was given with
--ui-approver and --ui-approver-key; without them the page shows the command
to run instead.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			started := false
			if start {
				// A server the hook started on demand serves no page, and
				// gives way to one that does.
				if err := server.StopOnDemand(ctx, a.dir, a.clock); err != nil && !errors.Is(err, server.ErrNoServer) && !errors.Is(err, server.ErrNotOnDemand) {
					return err
				}
			}
			c, err := server.Dial(ctx, a.dir, a.clock)
			// A server may be starting (it holds the directory before it
			// answers): give it a moment before starting another.
			wait := time.Second
			if !start {
				wait = a.lockWait
			}
			for deadline := time.Now().Add(wait); errors.Is(err, server.ErrNoServer) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				c, err = server.Dial(ctx, a.dir, a.clock)
			}
			if errors.Is(err, server.ErrNoServer) && start {
				if c, err = a.startServer(ctx, []string{"--ui"}, 30*time.Second, 100*time.Millisecond); err != nil {
					return err
				}
				started = true
			}
			if errors.Is(err, server.ErrNoServer) {
				return fmt.Errorf("no server serves %s: start one with 'pedigree serve --ui'", a.dir)
			}
			if err != nil {
				return err
			}
			defer c.Close()
			if err := a.checkServedRoot(ctx, c); err != nil {
				return err
			}
			path := ""
			if decision != "" {
				d, err := c.Decision(ctx, decision)
				if err != nil {
					return err
				}
				path = "/ui/decision/" + d.ID
			}
			link, err := c.UILogin(ctx, path)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(uiOutput{v: v1, URL: link, Started: started})
			}
			if started {
				fmt.Fprintf(a.errw, "started 'pedigree serve --ui' on %s (its log: %s)\n", a.dir, filepath.Join(a.dir, "serve.log"))
			}
			fmt.Fprintln(a.out, link)
			if open {
				if p, err := exec.LookPath("xdg-open"); err == nil {
					// The link holds a one-time token: never on a command
					// line, which every local user reads in /proc (red
					// team). The browser opens a file of this user's alone
					// that sends it on.
					f, err := os.CreateTemp("", "pedigree-ui-*.html")
					if err != nil {
						return err
					}
					page := `<!DOCTYPE html><meta charset="utf-8"><meta name="referrer" content="no-referrer"><meta http-equiv="refresh" content="0;url=` + html.EscapeString(link) + `">`
					if _, err := f.WriteString(page); err != nil {
						f.Close()
						return err
					}
					if err := f.Close(); err != nil {
						return err
					}
					return exec.Command(p, f.Name()).Start()
				}
				fmt.Fprintln(a.errw, "no xdg-open here: open the link above in a browser")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link in the default browser (xdg-open)")
	cmd.Flags().BoolVar(&start, "start", true, "start 'pedigree serve --ui' in the background when no server runs")
	cmd.Flags().StringVar(&decision, "decision", "", "land on this decision's page (an ID or unique prefix)")
	return cmd
}
