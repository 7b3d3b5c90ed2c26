package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// MaxSocketPath is the longest unix socket path the system binds: sun_path
// holds 108 bytes on Linux, the last one the terminating NUL.
const MaxSocketPath = 107

// ErrSocketPath is a socket path that does not fit, with nowhere else to
// put it.
var ErrSocketPath = errors.New("unix socket path too long")

// DefaultRuntimeDir is the per-user directory for sockets whose data
// directory's path is too long: xdgRuntime/pedigree when $XDG_RUNTIME_DIR
// is set (pass it; the server reads no environment), else
// /tmp/pedigree-UID.
func DefaultRuntimeDir(xdgRuntime string) string {
	if xdgRuntime != "" {
		return filepath.Join(xdgRuntime, "pedigree")
	}
	return filepath.Join(os.TempDir(), "pedigree-"+strconv.Itoa(os.Getuid()))
}

// runtimeSocketName is the socket's name in the runtime directory: one per
// data directory, from its resolved absolute path.
func runtimeSocketName(absDir string) string {
	h := sha256.Sum256([]byte(absDir))
	return hex.EncodeToString(h[:8]) + ".sock"
}

// resolvedDir is dir, absolute, with symlinks resolved (as clients see it).
func resolvedDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// socketPath says where the server of dir binds: explicit when given (it
// must fit), else DIR/pedigree.sock when that fits, else a socket named for
// dir in runtimeDir (made mode 0700, and refused when it is not this user's
// alone).
func socketPath(dir, explicit, runtimeDir string) (string, error) {
	if explicit != "" {
		if len(explicit) > MaxSocketPath {
			return "", fmt.Errorf("%w: --socket %s is %d bytes, and a unix socket path may have at most %d", ErrSocketPath, explicit, len(explicit), MaxSocketPath)
		}
		return explicit, nil
	}
	def := filepath.Join(dir, SocketFile)
	if abs, err := filepath.Abs(def); err == nil && len(abs) <= MaxSocketPath {
		return def, nil
	}
	abs, err := resolvedDir(dir)
	if err != nil {
		return "", err
	}
	if runtimeDir == "" {
		return "", fmt.Errorf("%w: %s is %d bytes, and a unix socket path may have at most %d: use a shorter data directory, or --socket PATH", ErrSocketPath, def, len(def), MaxSocketPath)
	}
	p := filepath.Join(runtimeDir, runtimeSocketName(abs))
	if len(p) > MaxSocketPath {
		return "", fmt.Errorf("%w: neither %s nor %s fits in the %d bytes of a unix socket path: pass --socket PATH", ErrSocketPath, def, p, MaxSocketPath)
	}
	if err := os.MkdirAll(runtimeDir, 0o700); err != nil {
		return "", fmt.Errorf("the runtime directory for the socket: %w", err)
	}
	if err := privateDir(runtimeDir); err != nil {
		return "", fmt.Errorf("the runtime directory for the socket %s: %w", runtimeDir, err)
	}
	return p, nil
}

// privateDir checks that dir is a directory of this user's that nobody
// else may enter.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not by this user (uid %d)", st.Uid, os.Getuid())
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("mode %04o lets others in; want 0700", m)
	}
	return nil
}

// socketTrusted says whether a socket that serve.json names may be the
// server of dir (absDir as discover resolved it): in the data directory itself, or the one named for it
// in a private directory of this user's (where a data directory too long
// for a socket path has it).
func socketTrusted(dir, absDir, sockDir, name string) bool {
	if sockDir == absDir {
		return true
	}
	resolved, err := resolvedDir(dir)
	return err == nil && name == runtimeSocketName(resolved) && privateDir(sockDir) == nil
}
