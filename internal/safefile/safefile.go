package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLink: a name is a symbolic link or a file with more than one hard
// link, where pedigree expects a file of its own.
var ErrLink = errors.New("is a link, not a file pedigree made")

// ErrNotOurs: a name holds something pedigree would not have made there
// (another kind of file, another owner): it is left as it is.
var ErrNotOurs = errors.New("is not a file pedigree made: left as it is")

// Kind is what a name is expected to hold.
type Kind int

const (
	// Regular is a regular file.
	Regular Kind = iota
	// Socket is a unix socket.
	Socket
)

func (k Kind) String() string {
	if k == Socket {
		return "socket"
	}
	return "regular file"
}

// split cleans rel and refuses a name that leaves the base.
func split(rel string) ([]string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("safefile: %q is not a relative name", rel)
	}
	c := filepath.Clean(rel)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return nil, fmt.Errorf("safefile: %q leaves its directory", rel)
	}
	return strings.Split(c, "/"), nil
}

// openBase opens base as given.
func openBase(base string) (int, error) {
	if base == "" {
		base = "."
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: base, Err: err}
	}
	return fd, nil
}

// parent opens the directory that holds rel's last component, walking
// every component below base without following a link; with mkdir, missing
// directories are made with perm. It returns that directory's descriptor
// and the last component.
func parent(base, rel string, mkdir bool, perm os.FileMode) (int, string, error) {
	parts, err := split(rel)
	if err != nil {
		return -1, "", err
	}
	fd, err := openBase(base)
	if err != nil {
		return -1, "", err
	}
	at := base
	for _, p := range parts[:len(parts)-1] {
		at = filepath.Join(at, p)
		next, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdir {
			if err = unix.Mkdirat(fd, p, uint32(perm.Perm())); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && isSymlink(at) {
			return -1, "", fmt.Errorf("%s %w", at, ErrLink)
		}
		if err != nil {
			return -1, "", &os.PathError{Op: "open", Path: at, Err: err}
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// isSymlink reports whether path is a symbolic link: it looks at the path
// again only to word an error.
func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// MkdirAll makes base/rel and every missing directory under base with
// perm, following no link.
func MkdirAll(base, rel string, perm os.FileMode) error {
	fd, _, err := parent(base, filepath.Join(rel, "x"), true, perm)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// WriteFile replaces base/rel with data, mode perm, atomically: a new
// temporary beside it (never an existing file), synced, renamed over the
// name. Whatever the name held (a link included) is replaced, never written
// through; a missing parent directory is made (0700).
func WriteFile(base, rel string, data []byte, perm os.FileMode) error {
	dir, name, err := parent(base, rel, true, 0o700)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	path := filepath.Join(base, rel)
	tmp, f, err := temp(dir, name, path, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return syncDir(dir)
}

// temp creates a new temporary file beside name, O_EXCL and O_NOFOLLOW.
func temp(dir int, name, path string, perm os.FileMode) (string, *os.File, error) {
	for range 8 {
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", nil, err
		}
		tmp := "." + name + ".tmp-" + hex.EncodeToString(r[:])
		fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, &os.PathError{Op: "create", Path: path, Err: err}
		}
		// The mode is what was asked, whatever the umask.
		if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
			unix.Close(fd)
			unix.Unlinkat(dir, tmp, 0)
			return "", nil, &os.PathError{Op: "chmod", Path: path, Err: err}
		}
		return tmp, os.NewFile(uintptr(fd), path), nil
	}
	return "", nil, fmt.Errorf("%s: no free temporary name", path)
}

func syncDir(dir int) error {
	if err := unix.Fsync(dir); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// Create makes base/rel, which must not exist (O_EXCL: a planted file or
// link fails it), and writes data to it, mode perm; nothing half-written
// stays. It is how keys are written: never over anything.
func Create(base, rel string, data []byte, perm os.FileMode) error {
	dir, name, err := parent(base, rel, false, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	path := filepath.Join(base, rel)
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	err = unix.Fchmod(fd, uint32(perm.Perm()))
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dir, name, 0)
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return syncDir(dir)
}

// OpenAppend opens base/rel for appending, making it with perm when it is
// missing. What is there must be a regular file of this user's with one
// link, reached without following a link: a symlink or a hard link planted
// in its place is refused (ErrLink), and so is a FIFO or a device, without
// blocking on it (ErrNotOurs). It is how logs are written.
func OpenAppend(base, rel string, perm os.FileMode) (*os.File, error) {
	dir, name, err := parent(base, rel, false, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	path := filepath.Join(base, rel)
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s %w", path, ErrLink)
	}
	if errors.Is(err, unix.ENXIO) {
		return nil, fmt.Errorf("%s: a regular file was expected: %w", path, ErrNotOurs)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := checkStat(&st, path, Regular); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Remove removes base/rel only when it is what pedigree made there: a
// file of kind k, owned by this user, with one link. A missing name is not
// an error; a link or anything else is left as it is, and reported
// (ErrLink, ErrNotOurs).
func Remove(base, rel string, k Kind) error {
	dir, name, err := parent(base, rel, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	path := filepath.Join(base, rel)
	if err := Check(dir, name, path, k); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

// Check says whether name in the open directory dir is a file of kind k
// that pedigree could have made: not a link, owned by this user, one link.
func Check(dir int, name, path string, k Kind) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	return checkStat(&st, path, k)
}

func checkStat(st *unix.Stat_t, path string, k Kind) error {
	mode := uint32(st.Mode) & unix.S_IFMT
	want := uint32(unix.S_IFREG)
	if k == Socket {
		want = unix.S_IFSOCK
	}
	switch {
	case mode == unix.S_IFLNK:
		return fmt.Errorf("%s %w", path, ErrLink)
	case mode != want:
		return fmt.Errorf("%s: a %s was expected: %w", path, k, ErrNotOurs)
	case st.Uid != uint32(os.Getuid()):
		return fmt.Errorf("%s: owned by uid %d: %w", path, st.Uid, ErrNotOurs)
	case k == Regular:
		return oneLink(st, "lstat", path)
	}
	return nil
}

// oneLink says a regular file has one name: none when another process
// removed its last between the lookup and the stat (so it is not there,
// os.ErrNotExist, as a moment later), more than one when it is a hard link.
func oneLink(st *unix.Stat_t, op, path string) error {
	switch st.Nlink {
	case 1:
		return nil
	case 0:
		return &os.PathError{Op: op, Path: path, Err: unix.ENOENT}
	}
	return fmt.Errorf("%s has %d hard links: it %w", path, st.Nlink, ErrLink)
}

// ReadFile reads base/rel, which must be a regular file of this user's
// with one link and at most max bytes, reached without following a link.
// A FIFO or device in its place is refused without blocking.
func ReadFile(base, rel string, max int64) ([]byte, error) {
	dir, name, err := parent(base, rel, false, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	path := filepath.Join(base, rel)
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s %w", path, ErrLink)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if err := oneLink(&st, "stat", path); err != nil {
		return nil, err
	}
	if st.Size > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d it may hold", path, st.Size, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read", path, max)
	}
	return b, nil
}

// Exists reports whether base/rel names anything (a link included),
// without following it.
func Exists(base, rel string) bool {
	_, err := os.Lstat(filepath.Join(base, rel))
	return err == nil
}

// CheckNoLinks refuses a directory any of whose names (each relative to
// base) is a symbolic link or a regular file with more than one hard
// link: a data directory whose files are links is not one pedigree made.
// Missing names are fine.
func CheckNoLinks(base string, rels ...string) error {
	for _, rel := range rels {
		p := filepath.Join(base, rel)
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%s %w", p, ErrLink)
		case unix.S_IFREG:
			if err := oneLink(&st, "lstat", p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// CheckTree is CheckNoLinks over every name in base/rel and below (rel ""
// is base itself): how a data directory's store files are checked.
func CheckTree(base, rel string) error {
	root := filepath.Join(base, rel)
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if p == root {
			if d.Type()&os.ModeSymlink != 0 {
				return fmt.Errorf("%s %w", p, ErrLink)
			}
			return nil
		}
		r, _ := filepath.Rel(base, p)
		return CheckNoLinks(base, r)
	})
}
