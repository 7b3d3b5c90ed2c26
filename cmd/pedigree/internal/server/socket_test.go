package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// longWorld is an on-disk world whose data directory's socket path would
// not fit in a unix socket address.
func longWorld(t *testing.T) *enginetest.World {
	t.Helper()
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.E.Close()
	w.E = nil
	long := filepath.Join(t.TempDir(), strings.Repeat("a-rather-long-directory-name/", 4), "data")
	if err := os.MkdirAll(filepath.Dir(long), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.Dir, long); err != nil {
		t.Fatal(err)
	}
	w.Dir = long
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if n := len(filepath.Join(long, server.SocketFile)); n <= server.MaxSocketPath {
		t.Fatalf("the test's directory is only %d bytes", n)
	}
	return w
}

// run starts a server and returns its socket, or the error it stopped with.
func start(t *testing.T, e *pedigree.Engine, o server.Options) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	o.Ready = func(s, _ string) { ready <- s }
	go func() { done <- server.Run(ctx, e, o) }()
	select {
	case s := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		})
		return s, nil
	case err := <-done:
		cancel()
		return "", err
	}
}

// serveUntilStopped serves e until the returned stop is called, which
// returns the error the server stopped with.
func serveUntilStopped(t *testing.T, e *pedigree.Engine) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, e, server.Options{Ready: func(string, string) { close(ready) }}) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	return func() error {
		cancel()
		return <-done
	}
}

// A data directory too long for DIR/pedigree.sock is served on a socket in
// the per-user runtime directory (0700), which clients (the hooks, every
// verb) find through serve.json and trust.
func TestSocketThatDoesNotFitMovesToTheRuntimeDir(t *testing.T) {
	w := longWorld(t)
	rt := filepath.Join(t.TempDir(), "rt")
	socket, err := start(t, w.E, server.Options{RuntimeDir: rt})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(socket) != rt || len(socket) > server.MaxSocketPath {
		t.Fatalf("socket %s, want one in %s", socket, rt)
	}
	if fi, err := os.Stat(rt); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("runtime dir: %v %v", fi, err)
	}
	c, err := server.Dial(t.Context(), w.Dir, nil)
	if err != nil {
		t.Fatalf("a client of the long directory did not find its server: %v", err)
	}
	if _, err := c.Registry(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Another user's directory (or one others may enter) is not trusted.
	os.Chmod(rt, 0o755)
	if _, err := server.Dial(t.Context(), w.Dir, nil); !errors.Is(err, server.ErrUntrustedServer) {
		t.Fatalf("a socket in a directory others may enter: %v, want ErrUntrustedServer", err)
	}
	os.Chmod(rt, 0o700)
}

// Without anywhere to put it, or with a --socket that is too long, the
// start fails naming the limit: never a server without its socket.
func TestSocketThatDoesNotFitFailsAtStart(t *testing.T) {
	w := longWorld(t)
	if _, err := start(t, w.E, server.Options{}); !errors.Is(err, server.ErrSocketPath) || !strings.Contains(err.Error(), "107") {
		t.Fatalf("no runtime dir: %v, want ErrSocketPath naming the limit", err)
	}
	if _, err := start(t, w.E, server.Options{Socket: filepath.Join(w.Dir, "x.sock")}); !errors.Is(err, server.ErrSocketPath) {
		t.Fatalf("a --socket too long: %v", err)
	}
	loose := filepath.Join(t.TempDir(), "loose")
	os.Mkdir(loose, 0o777)
	os.Chmod(loose, 0o777)
	if _, err := start(t, w.E, server.Options{RuntimeDir: loose}); err == nil || !strings.Contains(err.Error(), "lets others in") {
		t.Fatalf("a runtime dir others may enter: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, server.InfoFile)); err == nil {
		t.Fatal("serve.json written by a server that did not start")
	}
}

// A frozen registry never changes, so a client reads it from its server
// once: a hook event asked for it three times. The view it hands out is a
// copy (a caller that edits it changes nothing for the next).
func TestClientReadsAFrozenRegistryOnce(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	stop := serveUntilStopped(t, w.E)
	c, err := server.Dial(t.Context(), w.Dir, nil)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer c.Close()
	first, err := c.Registry(t.Context())
	if err != nil || !first.Frozen || len(first.Principals) == 0 {
		stop()
		t.Fatalf("registry %+v, %v", first, err)
	}
	first.Principals[0].ID = "user:edited"
	first.Principals = first.Principals[:0]
	// The server is gone: the frozen registry is still known.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	again, err := c.Registry(t.Context())
	if err != nil {
		t.Fatalf("the frozen registry was asked for again: %v", err)
	}
	want, err := w.E.Registry(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Principals) != len(want.Principals) || again.Principals[0].ID != want.Principals[0].ID || again.FreezeDigest != want.FreezeDigest {
		t.Fatalf("the view the client kept: %+v, want %+v", again, want)
	}
	// Nothing else is remembered: any other question needs the server.
	if _, err := c.ContextRef(t.Context(), "s"); !errors.Is(err, server.ErrServerGone) {
		t.Fatalf("a question after the server stopped: %v, want ErrServerGone", err)
	}
}
