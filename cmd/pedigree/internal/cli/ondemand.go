package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/internal/safefile"
)

// A hook event is a process of its own, and opening the store is most of
// what one costs (an event through a server takes about half the time and
// less than half the CPU: docs/performance.md). So the hook starts a server
// on demand: the first event of a directory no server holds starts
// 'pedigree serve --idle-exit', which stops by itself once no event has come
// for serverIdleExit, and every later event goes through it. A verb that needs the store itself stops
// such a server first (server.StopOnDemand) instead of refusing.
const (
	serverIdleExit = 30 * time.Minute
	// hookServeEnv set to "off" makes the hook open the store itself.
	hookServeEnv = "PEDIGREE_HOOK_SERVE"
	// serveLog is where a server started in the background writes its log.
	serveLog = "serve.log"
	// serveHold names the process of a verb that is taking the store: while
	// it does (at most holdFor), a hook event waits for it, and starts no
	// server, so that the verb is not starved of the store.
	serveHold = "serve.hold"
	holdFor   = 2 * time.Minute
)

// holdServers keeps the hook from starting servers while this process takes
// the store; release lets it start them again. A directory that does not
// exist yet holds nothing.
func (a *app) holdServers() (release func()) {
	if err := safefile.WriteFile(a.dir, serveHold, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return func() {}
	}
	return func() { safefile.Remove(a.dir, serveHold, safefile.Regular) }
}

// held says whether a live process holds the directory's servers off (see
// holdServers), written within holdFor.
func (a *app) held() bool {
	b, err := safefile.ReadFile(a.dir, serveHold, 32)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	fi, err := os.Lstat(filepath.Join(a.dir, serveHold))
	if err != nil || time.Since(fi.ModTime()) > holdFor {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// serveOnDemand returns a client of the directory's server, starting one
// for the hook when none runs, so that the event dials once. It is best
// effort: nil when there is none to be had (off, held by a verb, a server
// that cannot start or be trusted), and the event then finds its backend
// as without it, opening the store itself or refusing an untrusted server
// (and fails closed as that does).
func (a *app) serveOnDemand(ctx context.Context) *server.Client {
	if !a.autostart || a.getenv(hookServeEnv) == "off" {
		return nil
	}
	// A verb taking the store goes first: wait for it (up to the event's
	// lock wait), then start no server while it holds the store.
	for deadline := time.Now().Add(hookLockWait); a.held(); {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := server.Dial(ctx, a.dir, a.clock)
	if err == nil {
		return c
	}
	if errors.Is(err, server.ErrOtherRelease) {
		// Started on demand by another release (the binary was upgraded
		// under a running session): stop it, and start this one's (or
		// use the one a parallel event started meanwhile). A server a
		// person started is left running, and the event fails saying to
		// restart it (a.backend dials it again).
		if serr := server.StopOtherRelease(ctx, a.dir, a.clock); serr != nil && !errors.Is(serr, server.ErrNoServer) {
			return nil
		}
		if c, err = server.Dial(ctx, a.dir, a.clock); err == nil {
			return c
		}
	}
	if !errors.Is(err, server.ErrNoServer) {
		return nil
	}
	c, err = a.startServer(ctx, []string{"--idle-exit", serverIdleExit.String()}, hookLockWait, 5*time.Millisecond)
	if err != nil {
		fmt.Fprintf(a.errw, "pedigree: the hook's server did not start (%v); this event opens the store itself\n", err)
		return nil
	}
	return c
}

// startServer starts 'pedigree serve ARGS' on the directory, detached (a
// session of its own, its output appended to DIR/serve.log), and waits up to
// wait, looking every poll, until it answers: its client is returned. A
// server that stops at once because another one was starting beside it (two
// hook events at the same moment) is not an error when that other one
// answers.
func (a *app) startServer(ctx context.Context, args []string, wait, poll time.Duration) (*server.Client, error) {
	self, err := a.self()
	if err != nil {
		return nil, err
	}
	logf, err := safefile.OpenAppend(a.dir, serveLog, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	defer logf.Close()
	args = append([]string{"--dir", a.dir, "serve"}, args...)
	if a.trustRoot != "" {
		args = append([]string{"--trust-root", a.trustRoot}, args...)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(wait)
	for {
		c, err := server.Dial(ctx, a.dir, a.clock)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, server.ErrNoServer) {
			return nil, err
		}
		select {
		case err := <-exited:
			if c, derr := server.Dial(ctx, a.dir, a.clock); derr == nil {
				return c, nil
			}
			b, _ := safefile.ReadFile(a.dir, serveLog, 1<<20)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			return nil, fmt.Errorf("the server stopped at once (%v): %s", err, lines[len(lines)-1])
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the server did not answer within %s: see %s", wait, filepath.Join(a.dir, serveLog))
		}
	}
}

// closeInheritedOnExec marks every descriptor this process has above
// stderr close-on-exec. Go opens its own so; but one this process was given
// (a pipe of the shell or the agent that ran it) is not, and would pass to
// the server, which outlives this process by up to its idle time, holding
// that pipe open: whoever waits for the pipe's end would wait as long.
func closeInheritedOnExec() {
	ents, err := os.ReadDir("/dev/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
