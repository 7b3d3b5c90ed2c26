package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// ErrNotOnDemand: the directory's server was started by a person (serve
// without --idle-exit), and is theirs to stop.
var ErrNotOnDemand = errors.New("the running server was not started on demand")

// StopOnDemand stops the directory's server when it was started on demand
// (by the hook: serve --idle-exit), so that a verb that needs the store
// itself (a registry change, 'mcp add') can have it; the next hook event
// starts another. It returns ErrNoServer when none runs and ErrNotOnDemand
// for a server a person started, which is left running.
//
// The process signalled is the one that holds the socket, as the kernel
// says (SO_PEERCRED), after it proved it holds the directory's token: never
// a PID taken from serve.json alone, which whoever writes the directory
// could point at another of this user's processes.
func StopOnDemand(ctx context.Context, dir string, clock func() time.Time) error {
	return stopOnDemand(ctx, dir, clock, false)
}

// StopOtherRelease is StopOnDemand for a server of another release alone
// (release.go): one of this release, started on demand meanwhile by a
// parallel event that stopped the old one first, is left running (nil).
func StopOtherRelease(ctx context.Context, dir string, clock func() time.Time) error {
	return stopOnDemand(ctx, dir, clock, true)
}

func stopOnDemand(ctx context.Context, dir string, clock func() time.Time, otherOnly bool) error {
	socket, in, err := discoverInfo(dir)
	if err != nil {
		return err
	}
	if in.IdleExit == "" {
		return ErrNotOnDemand
	}
	// Any release: a server the previous binary started on demand is
	// stopped as well (release.go).
	c, _, err := dialAnyRelease(ctx, dir, clock)
	if err != nil {
		return err
	}
	c.Close()
	if otherOnly && len(c.missing) == 0 {
		return nil
	}
	pid, err := peerPID(ctx, socket)
	if err != nil {
		return err
	}
	if pid != in.PID {
		return fmt.Errorf("%w: the process on %s (%d) is not the one serve.json names (%d)", ErrUntrustedServer, socket, pid, in.PID)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop the server started on demand (pid %d): %w", pid, err)
	}
	// It drains what is in flight, removes serve.json, closes the store and
	// exits.
	deadline := time.Now().Add(DrainTimeout + 10*time.Second)
	for {
		// Gone when its process is: serve.json may name another server
		// by then, started on demand meanwhile (the caller stops it too).
		if !alive(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server started on demand (pid %d) did not stop within %s", pid, DrainTimeout+10*time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// alive says whether process pid still runs: a zombie (exited, not yet
// reaped by its parent) holds no lock and no socket, and counts as gone.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command's name, which is in parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// peerPID is the process that holds the unix socket, as the kernel says
// (socketPeer), and must be this user's.
func peerPID(ctx context.Context, socket string) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return 0, ErrNoServer
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var pid int
	var uid uint32
	var perr error
	if err := raw.Control(func(fd uintptr) { pid, uid, perr = socketPeer(int(fd)) }); err != nil {
		return 0, err
	}
	if perr != nil {
		return 0, perr
	}
	if int(uid) != syscall.Getuid() {
		return 0, fmt.Errorf("%w: the process on %s is uid %d's", ErrUntrustedServer, socket, uid)
	}
	return pid, nil
}
