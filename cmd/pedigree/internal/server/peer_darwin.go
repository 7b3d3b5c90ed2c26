//go:build darwin

package server

import "golang.org/x/sys/unix"

// socketPeer is the process at the other end of a unix socket, and its
// user, as the kernel says (LOCAL_PEERPID, LOCAL_PEERCRED).
func socketPeer(fd int) (pid int, uid uint32, err error) {
	if pid, err = unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID); err != nil {
		return 0, 0, err
	}
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return 0, 0, err
	}
	return pid, cred.Uid, nil
}
