package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"crypto/subtle"
	"errors"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStream serves one MCP session of newline-delimited JSON-RPC on r and
// w (a host's stdio) until r ends or ctx is done. A line that is not JSON,
// or is longer than MaxMessageBytes, is answered here with a JSON-RPC error
// and dropped: it neither reaches a handler nor ends the session.
func (g *Gateway) ServeStream(ctx context.Context, r io.Reader, w io.Writer) error {
	out := &lockedWriter{w: w}
	pr, pw := io.Pipe()
	go filterLines(r, pw, out)
	err := g.server.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: out})
	pr.Close()
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// lockedWriter keeps whole lines whole between the SDK and filterLines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) Close() error { return nil }

func (l *lockedWriter) fail(code int64, msg string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	l.Write(append(b, '\n'))
}

// filterLines copies the well-formed lines of r to the SDK's pipe.
func filterLines(r io.Reader, sdk *io.PipeWriter, out *lockedWriter) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, tooLong, err := readLine(br, MaxMessageBytes)
		switch {
		case tooLong:
			out.fail(jsonrpc.CodeInvalidRequest, fmt.Sprintf("pedigree: message larger than %d bytes", MaxMessageBytes))
		case len(bytes.TrimSpace(line)) == 0:
		case !json.Valid(line):
			out.fail(jsonrpc.CodeParseError, "pedigree: parse error: the message is not JSON")
		default:
			if _, werr := sdk.Write(append(line, '\n')); werr != nil {
				return
			}
		}
		if err != nil {
			sdk.Close()
			return
		}
	}
}

// readLine reads one line without its newline; past max bytes it reads on
// to the newline, keeps nothing, and says the line was too long.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

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
