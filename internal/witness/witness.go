// Package witness is an HTTP witness of pedigree logs in the style of
// C2SP's tlog-witness (https://github.com/C2SP/C2SP/blob/main/tlog-witness.md):
// a log hands it each new checkpoint with a consistency proof from the
// size the witness saw last; the witness checks the log's signature and the
// proof, keeps the checkpoint (in a state file, written safely), and
// returns its cosignature. It never accepts a checkpoint that does not
// extend what it holds, so a log rewritten or cut before the witnessed
// size cannot be witnessed again, and a verifier that asks the witness for
// what it holds names the rewrite.
//
// The protocol, as C2SP's, with pedigree's checkpoint (tlog.Checkpoint,
// JSON) in place of a signed note:
//
//	POST /add-checkpoint
//	old <size the log believes the witness holds>
//	<consistency proof hash, base64>   (one a line, none from 0 or an equal size)
//	<empty line>
//	<the checkpoint, JSON>
//
// 200 with the cosignature line (text/plain: "— <witness> <base64 of key
// ID (4 bytes), time (8, big endian) and Ed25519 signature>"), over
// "cosignature/v1\ntime <unix seconds>\n" and the checkpoint's signed body;
// 409 with the size the witness holds (text/x.tlog.size) when old is not
// it; 403 for a checkpoint no configured log key signed; 422 when the
// proof does not verify or an equal size has another root; 400 for a
// malformed request. An extension C2SP does not have: GET /checkpoint/<log
// ID>?challenge=<hex> returns the checkpoint the witness holds for that
// log (404: none), which verify compares with the log, with the witness's
// signature over the challenge and the answer (header AnswerHeader), so
// that no one between them answers for it.
package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// maxBody bounds a request (a checkpoint and at most 64 proof hashes).
const maxBody = 16 << 10

// LogID names a log by its key: the hex SHA-256 of the Ed25519 public key
// that signs its checkpoints.
func LogID(key ed25519.PublicKey) string {
	s := sha256.Sum256(key)
	return hex.EncodeToString(s[:])
}

// KeyID is the 4 bytes that start a cosignature by the witness name with
// key (as C2SP's cosignature/v1 key ID).
func KeyID(name string, key ed25519.PublicKey) []byte {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{0x04})
	h.Write(key)
	return h.Sum(nil)[:4]
}

func cosigned(cp *tlog.Checkpoint, t uint64) []byte {
	return append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), cp.SignedBody()...)
}

// state is what the witness holds per log.
type state struct {
	Version int                         `json:"version"`
	Logs    map[string]*tlog.Checkpoint `json:"logs"`
}

// Server is a witness.
type Server struct {
	name   string
	signer *registry.Signer
	pub    ed25519.PublicKey
	path   string
	logs   map[string]ed25519.PublicKey // by LogID

	mu sync.Mutex
	st state
}

// New is the witness name, signing with signer, keeping its state in the
// file path (made at first start, mode 0600), for the logs whose
// checkpoints keys sign.
func New(name string, signer *registry.Signer, path string, keys []ed25519.PublicKey) (*Server, error) {
	pub, err := signer.Ed25519()
	if err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsAny(name, " \n") {
		return nil, fmt.Errorf("witness name %q: one word", name)
	}
	if len(keys) == 0 {
		return nil, errors.New("a witness of no log")
	}
	s := &Server{name: name, signer: signer, pub: pub, path: path, logs: map[string]ed25519.PublicKey{}, st: state{Version: 1, Logs: map[string]*tlog.Checkpoint{}}}
	for _, k := range keys {
		s.logs[LogID(k)] = k
	}
	b, err := safefile.ReadFile(filepath.Dir(path), filepath.Base(path), 4<<20)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("witness state %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s.st); err != nil || s.st.Version != 1 || s.st.Logs == nil {
		return nil, fmt.Errorf("witness state %s is not a witness's state (version 1): %v", path, err)
	}
	return s, nil
}

// ServeHTTP serves POST /add-checkpoint and GET /checkpoint/<log ID>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/add-checkpoint":
		s.add(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/checkpoint/"):
		s.latest(w, r)
	default:
		http.Error(w, "POST /add-checkpoint or GET /checkpoint/<log ID>", http.StatusNotFound)
	}
}

// AnswerHeader carries the witness's signature of its answer to GET
// /checkpoint/<log ID>?challenge=<hex>: base64 of an Ed25519 signature
// over answered(challenge, log ID, body). A network attacker between a
// log and its witness cannot answer "none", or replay an older answer,
// for the witness: the log's challenge is fresh each time.
const AnswerHeader = "Pedigree-Witness-Answer"

// answered is what the witness signs for its answer body (empty: none)
// to a GET with challenge for the log logID.
func answered(challenge, logID string, body []byte) []byte {
	return append([]byte("pedigree-witness-latest/v1\nchallenge "+challenge+"\nlog "+logID+"\n"), body...)
}

func (s *Server) latest(w http.ResponseWriter, r *http.Request) {
	// The log ID and the challenge are hex of fixed bounds, so that no
	// request makes the signed text of another answer (a log ID that ends
	// in a newline and a checkpoint).
	id := strings.TrimPrefix(r.URL.Path, "/checkpoint/")
	challenge := r.URL.Query().Get("challenge")
	if b, err := hex.DecodeString(id); err != nil || len(b) != sha256.Size || id != strings.ToLower(id) {
		http.Error(w, "GET /checkpoint/<log ID: 64 hex digits>", http.StatusBadRequest)
		return
	}
	if c, err := hex.DecodeString(challenge); err != nil || len(c) < 16 || len(c) > 64 {
		http.Error(w, "GET /checkpoint/<log ID>?challenge=<16 to 64 bytes, hex>", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	cp := s.st.Logs[id]
	s.mu.Unlock()
	var body []byte
	status := http.StatusNotFound
	if cp != nil {
		b, err := json.Marshal(cp)
		if err != nil {
			http.Error(w, "the witness could not answer", http.StatusInternalServerError)
			return
		}
		body, status = append(b, '\n'), http.StatusOK
	}
	sig, err := s.signer.Sign(answered(challenge, id, body))
	if err != nil {
		http.Error(w, "the witness could not sign", http.StatusInternalServerError)
		return
	}
	w.Header().Set(AnswerHeader, base64.StdEncoding.EncodeToString(sig))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// request is a parsed add-checkpoint body.
type request struct {
	old    uint64
	proof  []string // hex
	cp     *tlog.Checkpoint
	logID  string
	logKey ed25519.PublicKey
}

func parse(body []byte) (*request, error) {
	head, cpb, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return nil, errors.New("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	oldS, ok := strings.CutPrefix(lines[0], "old ")
	if !ok {
		return nil, errors.New(`the first line is not "old <size>"`)
	}
	old, err := strconv.ParseUint(oldS, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("old size %q", oldS)
	}
	req := &request{old: old, proof: []string{}}
	if len(lines)-1 > 64 {
		return nil, errors.New("more than 64 proof hashes")
	}
	for _, l := range lines[1:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("proof line %q is not a base64 hash", l)
		}
		req.proof = append(req.proof, hex.EncodeToString(h))
	}
	if req.cp, err = tlog.ParseCheckpoint(cpb); err != nil {
		return nil, err
	}
	if old > req.cp.Size {
		return nil, fmt.Errorf("old size %d is beyond the checkpoint's %d", old, req.cp.Size)
	}
	return req, nil
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "the request is too large or unreadable", http.StatusBadRequest)
		return
	}
	req, err := parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for id, k := range s.logs {
		if tlog.VerifyCheckpoint(k, req.cp) == nil {
			req.logID, req.logKey = id, k
			break
		}
	}
	if req.logKey == nil {
		http.Error(w, "the checkpoint is not signed by a log this witness keeps", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.st.Logs[req.logID]
	var hs uint64
	if held != nil {
		hs = held.Size
	}
	if req.old != hs {
		w.Header().Set("Content-Type", "text/x.tlog.size")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%d\n", hs)
		return
	}
	if held != nil {
		if req.cp.Size == held.Size && req.cp.Root != held.Root {
			http.Error(w, "a checkpoint of the witnessed size with another root: the log was rewritten", http.StatusUnprocessableEntity)
			return
		}
		if err := tlog.VerifyConsistency(held.Size, req.cp.Size, held.Root, req.cp.Root, req.proof); err != nil {
			http.Error(w, "the consistency proof does not verify: the log does not extend what this witness holds: "+err.Error(), http.StatusUnprocessableEntity)
			return
		}
	} else if len(req.proof) != 0 {
		http.Error(w, "a proof from an empty tree has no hashes", http.StatusBadRequest)
		return
	}
	if held == nil || req.cp.Size > held.Size {
		next := state{Version: 1, Logs: map[string]*tlog.Checkpoint{}}
		for k, v := range s.st.Logs {
			next.Logs[k] = v
		}
		next.Logs[req.logID] = req.cp
		b, err := json.Marshal(next)
		if err == nil {
			err = safefile.WriteFile(filepath.Dir(s.path), filepath.Base(s.path), append(b, '\n'), 0o600)
		}
		if err != nil {
			http.Error(w, "the witness could not keep the checkpoint", http.StatusInternalServerError)
			return
		}
		s.st = next
	}
	now := uint64(time.Now().Unix())
	sig, err := s.signer.Sign(cosigned(req.cp, now))
	if err != nil {
		http.Error(w, "the witness could not sign", http.StatusInternalServerError)
		return
	}
	line := append(KeyID(s.name, s.pub), binary.BigEndian.AppendUint64(nil, now)...)
	line = append(line, sig...)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "— %s %s\n", s.name, base64.StdEncoding.EncodeToString(line))
}

// readTimeout bounds reading a whole request (its body too), and
// idleTimeout a connection between requests: a client that sends its
// body a byte at a time, or keeps connections open, does not hold them
// (and the witness's descriptors) for as long as it likes.
var readTimeout, idleTimeout = 30 * time.Second, 2 * time.Minute

// HTTPServer is the witness's HTTP server, with bounds on how long a
// client may take.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout,
		WriteTimeout: readTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: 16 << 10}
}

// Client hands a log's checkpoints to a witness at URL whose key is Key.
type Client struct {
	URL  string
	Key  ed25519.PublicKey
	HTTP *http.Client
}

// ErrConflict: the witness holds another size than the one offered as old
// (SizeConflict.Size).
var ErrConflict = errors.New("the witness holds another size")

// SizeConflict is a 409: the size the witness holds.
type SizeConflict struct{ Size uint64 }

func (c *SizeConflict) Error() string { return fmt.Sprintf("%v: %d", ErrConflict, c.Size) }
func (c *SizeConflict) Unwrap() error { return ErrConflict }

// ErrRefused: the witness refused the checkpoint (its proof does not
// verify, or it is not signed by a log the witness keeps).
var ErrRefused = errors.New("the witness refused the checkpoint")

func (c *Client) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// Add offers cp with a consistency proof (hex) from old, and checks the
// witness's cosignature.
func (c *Client) Add(ctx context.Context, old uint64, proof []string, cp *tlog.Checkpoint) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		raw, err := hex.DecodeString(h)
		if err != nil {
			return err
		}
		b.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
	}
	b.WriteString("\n")
	j, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	b.Write(j)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/add-checkpoint", &b)
	if err != nil {
		return err
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return fmt.Errorf("witness %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		return c.checkCosignature(cp, body)
	case http.StatusConflict:
		n, err := strconv.ParseUint(strings.TrimSpace(string(body)), 10, 64)
		if err != nil {
			return fmt.Errorf("witness %s: a conflict without a size", c.URL)
		}
		return &SizeConflict{Size: n}
	case http.StatusUnprocessableEntity, http.StatusForbidden:
		return fmt.Errorf("%w: %s: %s", ErrRefused, c.URL, strings.TrimSpace(string(body)))
	}
	return fmt.Errorf("witness %s: %s: %s", c.URL, resp.Status, strings.TrimSpace(string(body)))
}

func (c *Client) checkCosignature(cp *tlog.Checkpoint, body []byte) error {
	f := strings.Fields(strings.TrimSpace(string(body)))
	if len(f) != 3 || f[0] != "—" {
		return fmt.Errorf("witness %s: no cosignature line", c.URL)
	}
	raw, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(raw) != 4+8+ed25519.SignatureSize || !bytes.Equal(raw[:4], KeyID(f[1], c.Key)) {
		return fmt.Errorf("witness %s: a cosignature not by its key", c.URL)
	}
	if !ed25519.Verify(c.Key, cosigned(cp, binary.BigEndian.Uint64(raw[4:12])), raw[12:]) {
		return fmt.Errorf("witness %s: the cosignature does not verify", c.URL)
	}
	return nil
}

// Latest is the checkpoint the witness holds for the log of key (nil:
// none), asked with a fresh challenge: the answer, "none" too, must be
// signed by the witness's key over it.
func (c *Client) Latest(ctx context.Context, key ed25519.PublicKey) (*tlog.Checkpoint, error) {
	var ch [32]byte
	if _, err := rand.Read(ch[:]); err != nil {
		return nil, err
	}
	challenge, id := hex.EncodeToString(ch[:]), LogID(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.URL, "/")+"/checkpoint/"+id+"?challenge="+challenge, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, tlog.MaxCheckpointFileBytes+1))
	if err != nil || len(body) > tlog.MaxCheckpointFileBytes {
		return nil, fmt.Errorf("witness %s: an answer too large or unreadable", c.URL)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return nil, fmt.Errorf("witness %s: %s", c.URL, resp.Status)
	}
	if resp.StatusCode == http.StatusNotFound {
		body = nil
	}
	sig, err := base64.StdEncoding.DecodeString(resp.Header.Get(AnswerHeader))
	if err != nil || !ed25519.Verify(c.Key, answered(challenge, id, body), sig) {
		return nil, fmt.Errorf("witness %s: an answer to GET /checkpoint/ not signed by its key for this request (replayed, or not from the witness)", c.URL)
	}
	if body == nil {
		return nil, nil
	}
	cp, err := tlog.ParseCheckpoint(body)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", c.URL, err)
	}
	if err := tlog.VerifyCheckpoint(key, cp); err != nil {
		return nil, fmt.Errorf("witness %s holds a checkpoint the log did not sign: %w", c.URL, err)
	}
	return cp, nil
}
