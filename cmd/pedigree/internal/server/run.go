package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/safefile"
)

// Files in the data directory while a server runs.
const (
	SocketFile = "pedigree.sock"
	// InfoFile tells clients where the server listens.
	InfoFile = "serve.json"
)

// Timeouts of the HTTP server.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 2 * time.Minute
	// DrainTimeout bounds how long shutdown waits for requests in flight.
	DrainTimeout = 30 * time.Second
)

// Options say where to listen.
type Options struct {
	Socket string // default DIR/pedigree.sock, or a socket in RuntimeDir when that path is too long
	// RuntimeDir is where the socket goes when DIR/pedigree.sock would
	// exceed MaxSocketPath (see DefaultRuntimeDir); "" fails the start then.
	RuntimeDir string
	Addr       string // optional loopback host:port
	Log        *slog.Logger
	// ClaudeHooks answers Claude Code's http hooks (POST /v1/hooks/claude).
	ClaudeHooks bool
	// UI serves the page for people (pending decisions, the graph, the
	// log) on the TCP listener; without Addr it listens on 127.0.0.1 on a
	// port of the system's choosing.
	UI *UIOptions
	// Ready, when set, receives the addresses once listening.
	Ready func(socket, addr string)
	// IdleExit, when positive, stops the server once no request has been
	// in flight for that long: a server started on demand (by the hook)
	// does not outlive its use. serve.json says so (idle_exit), and a verb
	// that needs the store itself stops such a server rather than refusing.
	IdleExit time.Duration
}

type info struct {
	Socket string `json:"socket"`
	Addr   string `json:"addr,omitempty"`
	PID    int    `json:"pid"`
	// IdleExit is set for a server that stops when idle (started on
	// demand), in Go's duration syntax.
	IdleExit string `json:"idle_exit,omitempty"`
}

// CheckLoopback refuses a TCP address that is not on the loopback interface.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q: pedigree serves only on loopback (127.0.0.0/8, ::1, localhost)", addr)
	}
	return nil
}

// Run serves e until ctx is done, then drains: new connections are
// refused, requests in flight finish (up to DrainTimeout), and the socket
// and info file are removed. The caller closes the engine afterwards.
func Run(ctx context.Context, e *pedigree.Engine, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	dir := e.Dir()
	socket, err := socketPath(dir, o.Socket, o.RuntimeDir)
	if err != nil {
		return err
	}
	o.Socket = socket
	if o.UI != nil && o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Addr != "" {
		if err := CheckLoopback(o.Addr); err != nil {
			return err
		}
	}
	// A socket file left by a server that died is removed; one that
	// answers means another server runs (it could not, holding no lock,
	// but say so clearly). Anything but this user's socket in its place
	// (a regular file, a link) is left as it is, and listen fails on it.
	if fi, err := os.Lstat(o.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if c, err := net.DialTimeout("unix", o.Socket, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("a pedigree server already listens on %s", o.Socket)
		}
		if err := safefile.Remove(filepath.Dir(o.Socket), filepath.Base(o.Socket), safefile.Socket); err != nil {
			return fmt.Errorf("a stale socket: %w", err)
		}
	}
	ul, err := listenPrivate(o.Socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Socket, err)
	}
	// The socket is removed when the server stops only while it is the one
	// made here: the listener does not unlink a name someone replaced.
	ul.(*net.UnixListener).SetUnlinkOnClose(false)
	defer safefile.Remove(filepath.Dir(o.Socket), filepath.Base(o.Socket), safefile.Socket)
	listeners := []net.Listener{ul}
	if o.Addr != "" {
		tl, err := net.Listen("tcp", o.Addr)
		if err != nil {
			ul.Close()
			return fmt.Errorf("listen on %s: %w", o.Addr, err)
		}
		listeners = append(listeners, tl)
		o.Addr = tl.Addr().String()
	}
	// The token lives in the data directory (beside the socket for an
	// engine without one), where clients that may use the store find it.
	tokenDir := dir
	if tokenDir == "" {
		tokenDir = filepath.Dir(o.Socket)
	}
	token, err := makeToken(tokenDir)
	if err != nil {
		for _, l := range listeners {
			l.Close()
		}
		return err
	}
	defer safefile.Remove(tokenDir, TokenFile, safefile.Regular)
	s := New(e, o.Log)
	if o.UI != nil {
		if err := s.EnableUI("http://"+o.Addr, *o.UI); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
	}
	if o.ClaudeHooks {
		if err := s.EnableClaudeHooks(); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
	}
	var handler http.Handler = s.Authenticated(token)
	var idle <-chan error
	if o.IdleExit > 0 {
		ictx, stop := context.WithCancel(ctx)
		defer stop()
		// It also stops once serve.json is gone (the directory removed, as
		// a test's or a trial's is): it is nobody's server then.
		gone := func() bool {
			_, err := os.Lstat(filepath.Join(dir, InfoFile))
			return errors.Is(err, os.ErrNotExist)
		}
		handler, idle = idleAfter(ictx, handler, o.IdleExit, gone)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout,
		ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn)}
	if dir != "" {
		in := info{Socket: o.Socket, Addr: o.Addr, PID: os.Getpid()}
		if o.IdleExit > 0 {
			in.IdleExit = o.IdleExit.String()
		}
		b, _ := json.Marshal(in)
		if err := safefile.WriteFile(dir, InfoFile, b, 0o600); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
		defer safefile.Remove(dir, InfoFile, safefile.Regular)
	}
	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { errs <- hs.Serve(l) }()
	}
	o.Log.Info("serving", "socket", o.Socket, "addr", o.Addr, "trust_root", e.TrustRoot(), "ui", o.UI != nil)
	if e.TrustRoot() == pedigree.TrustRootNone {
		o.Log.Warn("no trust root is pinned: whoever can write the data directory can rebuild its registry unnoticed; pin the operator public key or the freeze digest (--trust-root)")
	}
	if o.Ready != nil {
		o.Ready(o.Socket, o.Addr)
	}
	var stopped error
	select {
	case <-ctx.Done():
	case stopped = <-idle:
		o.Log.Info("idle", "for", o.IdleExit.String(), "directory_gone", stopped != nil)
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	s.Drain()
	o.Log.Info("draining")
	sctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	return errors.Join(stopped, hs.Shutdown(sctx))
}

// ErrDirectoryGone: a server on demand stopped because its data directory
// (its serve.json) was removed. Its store cannot be closed cleanly then
// (Badger retries a flush into the removed directory for ever): the caller
// exits without closing it.
var ErrDirectoryGone = errors.New("the data directory was removed")

// idleAfter wraps h so that the returned channel receives once no request
// has been in flight for d (nil), or none is in flight and gone says so
// (ErrDirectoryGone); never, once ctx is done. A request that arrives then
// is still answered: shutdown drains what is in flight.
func idleAfter(ctx context.Context, h http.Handler, d time.Duration, gone func() bool) (http.Handler, <-chan error) {
	var mu sync.Mutex
	inFlight, last := 0, time.Now()
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(max(min(d/4, time.Second), 10*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			quiet, idle := inFlight == 0, time.Since(last) >= d
			mu.Unlock()
			if quiet && gone() {
				done <- ErrDirectoryGone
				return
			}
			if quiet && idle {
				done <- nil
				return
			}
		}
	}()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			last = time.Now()
			mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	}), done
}

// socketUmask serialises the umask that makes a socket private from its
// first instant: chmod after bind would follow a link put in its place.
var socketUmask sync.Mutex

// listenPrivate listens on a new unix socket at path, mode 0600 from its
// creation (bind makes it under a 0177 umask), and checks that what is at
// path is that socket, this user's.
func listenPrivate(path string) (net.Listener, error) {
	socketUmask.Lock()
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	socketUmask.Unlock()
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	if err == nil {
		err = ownedPrivate(fi, true)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("the socket just made: %w", err)
	}
	return l, nil
}
