package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// How clients and the server trust each other.
//
// The server makes a bearer token at start (TokenFile, mode 0600 in the data
// directory) and refuses, on the unix socket and on loopback TCP alike, any
// request that does not carry it, that carries an Origin header (a browser),
// whose Host is not loopback (DNS rebinding), or that has a body that is not
// application/json (a cross-site form post). Only /healthz and /readyz (which
// say nothing) and the challenge are open.
//
// A client trusts the server that serve.json names only when its socket is
// in the data directory (or, for a directory whose path is too long for a
// socket, the one named for it in a private runtime directory of this
// user's: see socketPath), is a socket owned by this user with mode 0600, and
// the server proves it holds the token before the client sends anything
// else: the client sends a random nonce, the server answers
// HMAC-SHA256(token, nonce), and the client checks it. Reading the token
// needs read access to the data directory, which is the boundary anyway.

// TokenFile holds the running server's bearer token.
const TokenFile = "serve.token"

// challengePath is where a client asks the server to prove it holds the
// token. It is open: the nonce is the client's, and the answer gives
// nothing away.
const challengePath = "/v1/challenge"

// ErrUntrustedServer: serve.json names a server the client must not trust
// (a socket outside the data directory, another owner, a loose mode, or a
// server that cannot prove it holds the directory's token).
var ErrUntrustedServer = errors.New("the server that serve.json names cannot be trusted")

// errUnauthorized is a request without the server's token.
var errUnauthorized = errors.New("unauthorized")

// makeToken writes a new random token to dir/TokenFile, mode 0600,
// replacing an old one (through a rename, so it is never readable loose).
func makeToken(dir string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b[:])
	if err := safefile.WriteFile(dir, TokenFile, []byte(tok), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", TokenFile, err)
	}
	return tok, nil
}

// ReadToken reads the running server's token from dir. The file must be
// this user's and mode 0600: a token others could read authenticates them.
func ReadToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if err := ownedPrivate(fi, false); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	b, err := safefile.ReadFile(dir, TokenFile, 1024)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) != 64 {
		return "", fmt.Errorf("%s: not a pedigree token", path)
	}
	return tok, nil
}

// ownedPrivate checks that fi is a regular file (or, with socket, a unix
// socket) owned by this user that nobody else may read or write.
func ownedPrivate(fi os.FileInfo, socket bool) error {
	switch {
	case socket && fi.Mode().Type() != os.ModeSocket:
		return errors.New("not a unix socket")
	case !socket && !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not by this user (uid %d)", st.Uid, os.Getuid())
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("mode %04o lets others in; want 0600", m)
	}
	return nil
}

// challengeMAC is the server's answer to a client's nonce.
func challengeMAC(token string, nonce []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("pedigree serve challenge v1\x00"))
	m.Write(nonce)
	return m.Sum(nil)
}

// Authenticated is the server's handler behind the checks above; Run serves
// nothing else. (Handler alone has no authentication: it is for tests and
// for embedding behind the embedder's own.)
func (s *Server) Authenticated(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == claudeHookPath {
			// Claude Code's http hooks carry the hook's own token, and
			// Claude Code lets a call through on any refusal with a 4xx:
			// the route admits, and answers every failure with a block.
			s.ServeHTTP(w, r)
			return
		}
		if s.ui != nil && r.URL.Path == "/favicon.ico" {
			w.WriteHeader(http.StatusNoContent) // a browser asks for it on every page
			return
		}
		if s.ui != nil && strings.HasPrefix(r.URL.Path, uiPrefix) {
			// A browser: the page checks its own cookie, origin and
			// CSRF token (ui.go), and nothing else is served there.
			s.ui.ServeHTTP(w, r)
			return
		}
		if err := admit(r, token); err != nil {
			status, kind := http.StatusForbidden, "forbidden"
			if errors.Is(err, errUnauthorized) {
				status, kind = http.StatusUnauthorized, "unauthorized"
				w.Header().Set("WWW-Authenticate", `Bearer realm="pedigree"`)
			}
			s.log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "cause", err.Error())
			s.fail(w, status, kind, err.Error())
			return
		}
		if r.URL.Path == challengePath {
			s.challenge(w, r, token)
			return
		}
		s.ServeHTTP(w, r)
	})
}

// admit refuses what a browser or another local user could send.
func admit(r *http.Request, token string) error {
	if _, ok := r.Header["Origin"]; ok {
		return errors.New("a request with an Origin header (from a browser) is refused")
	}
	if !loopbackHost(r.Host) {
		return fmt.Errorf("the Host header %q is not loopback", r.Host)
	}
	if r.ContentLength != 0 || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return fmt.Errorf("a request body must be Content-Type: application/json, not %q", r.Header.Get("Content-Type"))
		}
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", challengePath:
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		return fmt.Errorf("%w: the request does not carry the server's bearer token (DIR/%s)", errUnauthorized, TokenFile)
	}
	return nil
}

// loopbackHost accepts localhost and loopback addresses, with or without a
// port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func (s *Server) challenge(w http.ResponseWriter, r *http.Request, token string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.fail(w, http.StatusMethodNotAllowed, "method", "use GET")
		return
	}
	nonce, err := hex.DecodeString(r.URL.Query().Get("nonce"))
	if err != nil || len(nonce) != 32 {
		s.fail(w, http.StatusBadRequest, "malformed", "nonce: want 64 hex characters")
		return
	}
	reply(w, challengeResponse{MAC: hex.EncodeToString(challengeMAC(token, nonce)), Protocol: legacyProtocol, Routes: s.listed})
}

// challengeResponse is the server's answer to the challenge: the MAC, and
// the routes it serves (release.go).
type challengeResponse struct {
	MAC      string   `json:"mac"`
	Protocol int      `json:"protocol"` // for builds before the route list
	Routes   []string `json:"routes"`
}

// maxChallengeBytes bounds the challenge's answer: the MAC and the routes,
// with room for many more.
const maxChallengeBytes = 64 << 10

// clientHost is the Host every client request names: the unix socket has
// none, and the server accepts only loopback.
const clientHost = "localhost"

// authorize adds the token to a request.
func (c *Client) authorize(req *http.Request) {
	req.Host = clientHost
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// discover reads serve.json and checks the socket it names: inside dir, a
// socket, this user's, mode 0600. No serve.json, or a socket that is gone,
// is ErrNoServer; anything else that is wrong is ErrUntrustedServer.
func discover(dir string) (string, error) {
	socket, _, err := discoverInfo(dir)
	return socket, err
}

// discoverInfo is discover with what serve.json says.
func discoverInfo(dir string) (string, info, error) {
	b, err := safefile.ReadFile(dir, InfoFile, 1<<20)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "", info{}, ErrNoServer // no directory, or no server: the caller says which
	}
	untrusted := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s (it may have been tampered with; remove it if no server runs)",
			ErrUntrustedServer, filepath.Join(dir, InfoFile), fmt.Sprintf(format, a...))
	}
	if err != nil {
		return "", info{}, untrusted("%v", err)
	}
	var in info
	if err := json.Unmarshal(b, &in); err != nil || in.Socket == "" {
		return "", info{}, untrusted("malformed")
	}
	absDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", info{}, untrusted("%v", err)
	}
	sockDir, err := filepath.EvalSymlinks(filepath.Dir(in.Socket))
	if errors.Is(err, os.ErrNotExist) {
		return "", info{}, ErrNoServer
	}
	if err != nil || !socketTrusted(dir, absDir, sockDir, filepath.Base(in.Socket)) {
		return "", info{}, untrusted("socket %s is neither in the data directory nor the one named for it in a private directory of this user's", in.Socket)
	}
	socket := filepath.Join(sockDir, filepath.Base(in.Socket))
	fi, err := os.Lstat(socket)
	if errors.Is(err, os.ErrNotExist) {
		return "", info{}, ErrNoServer
	}
	if err != nil {
		return "", info{}, untrusted("%v", err)
	}
	if err := ownedPrivate(fi, true); err != nil {
		return "", info{}, untrusted("socket %s: %v", socket, err)
	}
	return socket, in, nil
}

// prove asks the server to show it holds the token, before anything else
// is sent to it. A socket that does not answer is ErrNoServer (a server that
// died); one that answers wrongly is ErrUntrustedServer.
func (c *Client) prove(ctx context.Context, socket string) error {
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+clientHost+challengePath+"?nonce="+hex.EncodeToString(nonce[:]), nil)
	if err != nil {
		return err
	}
	req.Host = clientHost
	resp, err := c.hc.Do(req)
	if err != nil {
		return ErrNoServer
	}
	defer resp.Body.Close()
	var out challengeResponse
	dec := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxChallengeBytes))
	mac, derr := []byte(nil), dec.Decode(&out)
	if derr == nil {
		mac, derr = hex.DecodeString(out.MAC)
	}
	if resp.StatusCode != http.StatusOK || derr != nil || !hmac.Equal(mac, challengeMAC(c.token, nonce[:])) {
		return fmt.Errorf("%w: the server on %s could not prove it holds this data directory's token (serve.json may have been tampered with)",
			ErrUntrustedServer, socket)
	}
	c.missing = missing(out.Routes)
	return nil
}
