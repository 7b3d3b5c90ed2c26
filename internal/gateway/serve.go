package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStream serves one MCP session of newline-delimited JSON-RPC on r and
// w (a host's stdio) until r ends or ctx is done.
func (g *Gateway) ServeStream(ctx context.Context, r io.Reader, w io.Writer) error {
	err := g.server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// ServeHTTP serves streamable HTTP on l until ctx is done. Every request
// must carry "Authorization: Bearer TOKEN"; the SDK also refuses a loopback
// request whose Host header is not loopback. Each HTTP session of MCP is a
// pedigree session.
func (g *Gateway) ServeHTTP(ctx context.Context, l net.Listener, token string) error {
	if token == "" {
		return errors.New("gateway: streamable HTTP needs a bearer token")
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, nil)
	want := []byte("Bearer " + token)
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "pedigree: a bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: auth, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
