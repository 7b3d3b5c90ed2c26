//go:build linux

package server

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerPID is the process that holds the unix socket, as the kernel says
// (SO_PEERCRED), and must be this user's.
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
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	if int(cred.Uid) != syscall.Getuid() {
		return 0, fmt.Errorf("%w: the process on %s is uid %d's", ErrUntrustedServer, socket, cred.Uid)
	}
	return int(cred.Pid), nil
}
