package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// syncBuffer is a log sink the server's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The server says at start whether a trust root is pinned, and warns when
// none is.
func TestServerLogsTrustRoot(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.E.Close()
	w.E = nil
	root, err := pedigree.ReadTrustRoot(pedigree.TrustRootPath(w.OperatorKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts []pedigree.Option
		want string
		warn bool
	}{{nil, `"trust_root":"none"`, true}, {[]pedigree.Option{pedigree.WithTrustRoot(root)}, `"trust_root":"pinned key"`, false}} {
		e, err := pedigree.Open(t.Context(), w.Dir, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		var buf syncBuffer
		ctx, cancel := context.WithCancel(t.Context())
		err = server.Run(ctx, e, server.Options{Socket: filepath.Join(t.TempDir(), "s.sock"), Log: slog.New(slog.NewJSONHandler(&buf, nil)),
			Ready: func(string, string) { cancel() }})
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if !strings.Contains(out, c.want) || strings.Contains(out, "no trust root is pinned") != c.warn {
			t.Fatalf("want %s (warning %v) in the log:\n%s", c.want, c.warn, out)
		}
	}
}
