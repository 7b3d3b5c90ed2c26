package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
)

// TestRedTeamUIOpenKeepsTheLoginTokenOutOfArgv: 'pedigree ui --open' runs
// 'xdg-open LINK', so the one-time login token sits in the argv of
// xdg-open (and of the browser it starts), which every local user reads in
// /proc/PID/cmdline. Another local user polling /proc spends the link
// first and holds the session (and, with --ui-approver-key, approves).
func TestRedTeamUIOpenKeepsTheLoginTokenOutOfArgv(t *testing.T) {
	c := newEnv(t)
	c.must("init")
	e, err := pedigree.Open(t.Context(), c.dir, pedigree.WithClock(c.clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		err := server.Run(ctx, e, server.Options{UI: &server.UIOptions{}, Ready: func(string, string) { close(ready) }})
		done <- errors.Join(err, e.Close())
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	c.served = true

	// A fake xdg-open that writes down its argv.
	bin := filepath.Join(c.tmp, "bin")
	os.MkdirAll(bin, 0o755)
	argv := filepath.Join(c.tmp, "argv")
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte("#!/bin/sh\necho \"$@\" > "+argv+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	r := c.must("ui", "--open", "--start=false")
	link := strings.TrimSpace(r.out)
	var got []byte
	for i := 0; i < 100; i++ {
		if got, _ = os.ReadFile(argv); len(got) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) == 0 {
		t.Fatal("xdg-open did not run")
	}
	i := strings.Index(link, "t=")
	if i < 0 {
		t.Fatalf("no token in the link %q", link)
	}
	tok := link[i+2 : i+2+64]
	if strings.Contains(string(got), tok) {
		t.Errorf("the one-time login token is in xdg-open's argv, readable by every local user in /proc: %s", got)
	}
}
