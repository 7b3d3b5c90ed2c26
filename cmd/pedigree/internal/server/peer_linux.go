//go:build linux

package server

import "golang.org/x/sys/unix"

// socketPeer is the process at the other end of a unix socket, and its
// user, as the kernel says (SO_PEERCRED).
func socketPeer(fd int) (pid int, uid uint32, err error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Pid), cred.Uid, nil
}
