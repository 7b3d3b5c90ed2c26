package safefile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// outside is a file outside the directory under test, and a way to check
// that it was neither written nor removed.
func outside(t *testing.T) (path string, intact func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(path, []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "victim" {
			t.Fatalf("the file outside was touched: %q %v", b, err)
		}
	}
}

// TestWriteFileThroughLinks: a symbolic link or a hard link in place of
// the name, or a link in place of a directory on the way, is never written
// through.
func TestWriteFileThroughLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(dir, victim string) error
		rel   string
		fails bool
	}{
		{"symlink at the name", func(d, v string) error { return os.Symlink(v, filepath.Join(d, "f")) }, "f", false},
		{"hard link at the name", func(d, v string) error { return os.Link(v, filepath.Join(d, "f")) }, "f", false},
		{"symlink at a directory on the way", func(d, v string) error { return os.Symlink(filepath.Dir(v), filepath.Join(d, "sub")) }, "sub/victim", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim, intact := outside(t)
			dir := t.TempDir()
			if err := tc.plant(dir, victim); err != nil {
				t.Fatal(err)
			}
			err := WriteFile(dir, tc.rel, []byte("pedigree"), 0o600)
			intact()
			if tc.fails {
				if !errors.Is(err, ErrLink) {
					t.Fatalf("want ErrLink, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := ReadFile(dir, tc.rel, 100)
			if err != nil || string(b) != "pedigree" {
				t.Fatalf("the name holds %q %v", b, err)
			}
			fi, _ := os.Lstat(filepath.Join(dir, tc.rel))
			if fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
				t.Fatalf("mode %v", fi.Mode())
			}
		})
	}
}

// TestCreateRefusesWhatIsThere: a key is never written over anything,
// a dangling link included (O_CREAT alone would create its target).
func TestCreateRefusesWhatIsThere(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "made-through-the-link")
	os.Symlink(target, filepath.Join(dir, "k"))
	if err := Create(dir, "k", []byte("key"), 0o600); err == nil {
		t.Fatal("created through a dangling link")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was created: %v", err)
	}
}

// TestRemoveOnlyWhatPedigreeMade: a regular file where a socket is
// expected, a link, or a file with another hard link stays.
func TestRemoveOnlyWhatPedigreeMade(t *testing.T) {
	dir := t.TempDir()
	victim, intact := outside(t)
	os.WriteFile(filepath.Join(dir, "regular"), []byte("x"), 0o600)
	os.Symlink(victim, filepath.Join(dir, "symlink"))
	os.Link(victim, filepath.Join(dir, "hardlink"))
	for _, name := range []string{"regular", "symlink"} {
		if err := Remove(dir, name, Socket); err == nil {
			t.Errorf("%s removed as a socket", name)
		}
	}
	for _, name := range []string{"symlink", "hardlink"} {
		if err := Remove(dir, name, Regular); !errors.Is(err, ErrLink) {
			t.Errorf("%s: want ErrLink, got %v", name, err)
		}
	}
	for _, name := range []string{"regular", "symlink", "hardlink"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was removed", name)
		}
	}
	intact()
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if err := Remove(dir, "s", Regular); err == nil {
		t.Fatal("a socket removed as a regular file")
	}
	if err := Remove(dir, "s", Socket); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, "regular", Regular); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, "gone", Regular); err != nil {
		t.Fatalf("a missing name: %v", err)
	}
}

// TestReadFileRefusesLinks: a symbolic link or a hard link is not read.
func TestReadFileRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	victim, _ := outside(t)
	os.Symlink(victim, filepath.Join(dir, "s"))
	os.Link(victim, filepath.Join(dir, "h"))
	for _, name := range []string{"s", "h"} {
		if _, err := ReadFile(dir, name, 100); !errors.Is(err, ErrLink) {
			t.Errorf("%s: want ErrLink, got %v", name, err)
		}
	}
	if err := CheckNoLinks(dir, "s"); !errors.Is(err, ErrLink) {
		t.Errorf("CheckNoLinks: %v", err)
	}
	if err := CheckNoLinks(dir, "h"); !errors.Is(err, ErrLink) {
		t.Errorf("CheckNoLinks: %v", err)
	}
	if _, err := ReadFile(dir, "../x", 100); err == nil {
		t.Error("a name that leaves the directory was read")
	}
}

// TestOpenAppendRefusesWhatIsNotALog: a log is appended to only when it is
// this user's regular file with one link; a symlink, a hard link, a
// dangling link or a FIFO in its place is refused, the FIFO without
// blocking, and nothing outside is written.
func TestOpenAppendRefusesWhatIsNotALog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(dir, victim string) error
		want  error
	}{
		{"symlink", func(d, v string) error { return os.Symlink(v, filepath.Join(d, "log")) }, ErrLink},
		{"dangling symlink", func(d, v string) error { return os.Symlink(v+".new", filepath.Join(d, "log")) }, ErrLink},
		{"hard link", func(d, v string) error { return os.Link(v, filepath.Join(d, "log")) }, ErrLink},
		{"fifo", func(d, _ string) error { return unix.Mkfifo(filepath.Join(d, "log"), 0o600) }, ErrNotOurs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim, intact := outside(t)
			dir := t.TempDir()
			if err := tc.plant(dir, victim); err != nil {
				t.Fatal(err)
			}
			f, err := OpenAppend(dir, "log", 0o600)
			if err == nil {
				f.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			intact()
			if _, err := os.Stat(victim + ".new"); err == nil {
				t.Fatal("the dangling link's target was made")
			}
		})
	}
	dir := t.TempDir()
	for _, line := range []string{"one\n", "two\n"} {
		f, err := OpenAppend(dir, "log", 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(line)
		f.Close()
	}
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	fi, _ := os.Lstat(filepath.Join(dir, "log"))
	if string(b) != "one\ntwo\n" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log %q mode %v", b, fi.Mode())
	}
}

// TestOneLink: a regular file's stat with one link is pedigree's, with two
// a hard link, and with none a file another process removed between the
// lookup and the stat: not there, as it is a moment later.
func TestOneLink(t *testing.T) {
	for _, c := range []struct {
		nlink      uint64
		gone, link bool
	}{{1, false, false}, {0, true, false}, {2, false, true}} {
		err := oneLink(&unix.Stat_t{Nlink: c.nlink}, "lstat", "f")
		if errors.Is(err, os.ErrNotExist) != c.gone || errors.Is(err, ErrLink) != c.link || (err == nil) != (c.nlink == 1) {
			t.Errorf("%d links: %v", c.nlink, err)
		}
	}
}

// TestRemoveRacesRemove: processes that remove the same file at once (hook
// events side by side settling one mark) each see it removed, none an
// error; a stat that lands as another's unlink does sees no link at all.
func TestRemoveRacesRemove(t *testing.T) {
	d := t.TempDir()
	for range 2000 {
		if err := WriteFile(d, "mark", []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- Remove(d, "mark", Regular) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}
