package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestGone: the errors a request meets when its server stops are known as
// ErrServerGone, the one a hook event is delivered again on; any other
// error is not.
func TestGone(t *testing.T) {
	post := func(err error) error { return &url.Error{Op: "Post", URL: "http://localhost/v1/check", Err: err} }
	for _, c := range []struct {
		err  error
		gone bool
	}{
		// CI saw this one as a server on demand stopped under an event.
		{post(errors.New(serverClosedIdle)), true},
		{post(&net.OpError{Op: "dial", Net: "unix", Err: syscall.ENOENT}), true},
		{post(&net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}), true},
		{post(&net.OpError{Op: "write", Net: "unix", Err: syscall.EPIPE}), true},
		{post(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)), false},
		{post(errors.New("net/http: request canceled")), false},
		{&RemoteError{Status: 500, Kind: "internal", Msg: "boom"}, false},
	} {
		if got := gone(c.err); got != c.gone {
			t.Errorf("gone(%v) = %v, want %v", c.err, got, c.gone)
		}
	}
}

// TestServerClosedIdleIsNetHTTPs: the text gone knows the error by is the
// one net/http's transport makes (it does not export the error). A Go
// release that changes it fails here, not as an event that fails at random.
func TestServerClosedIdleIsNetHTTPs(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "src", "net", "http", "transport.go"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "errors.New(" + strconv.Quote(serverClosedIdle) + ")"; !strings.Contains(string(src), want) {
		t.Fatalf("net/http's transport.go no longer has %s", want)
	}
}
