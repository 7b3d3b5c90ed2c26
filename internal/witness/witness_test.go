package witness_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/internal/witness"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

func signer(t *testing.T) (*registry.Signer, ed25519.PublicKey) {
	t.Helper()
	s, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := s.Ed25519()
	return s, pub
}

func checkpoint(t *testing.T, log *registry.Signer, size uint64) *tlog.Checkpoint {
	t.Helper()
	root := make([]byte, 32)
	_, _ = rand.Read(root)
	cp, err := tlog.SignCheckpoint(log, size, hex.EncodeToString(root), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// The protocol's answers: a cosignature for a checkpoint of a log it keeps
// (checked by the client against the witness's key), 409 with the size it
// holds for a wrong old size (kept across a restart), 422 for the
// witnessed size with another root (a rewrite), 403 for a log it does not
// keep.
func TestWitnessProtocol(t *testing.T) {
	ctx := context.Background()
	wkey, wpub := signer(t)
	log, lpub := signer(t)
	state := filepath.Join(t.TempDir(), "state.json")
	s, err := witness.New("w1", wkey, state, []ed25519.PublicKey{lpub})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	c := &witness.Client{URL: ts.URL, Key: wpub}
	first := checkpoint(t, log, 5)
	if err := c.Add(ctx, 0, nil, first); err != nil {
		t.Fatalf("the first checkpoint: %v", err)
	}
	if got, err := c.Latest(ctx, lpub); err != nil || got.Root != first.Root {
		t.Fatalf("what the witness holds: %+v %v", got, err)
	}
	// A client that expects another witness key refuses the cosignature.
	_, other := signer(t)
	if err := (&witness.Client{URL: ts.URL, Key: other}).Add(ctx, 5, nil, first); err == nil || !strings.Contains(err.Error(), "cosignature") {
		t.Fatalf("a cosignature by another key: %v", err)
	}
	var sc *witness.SizeConflict
	if err := c.Add(ctx, 0, nil, checkpoint(t, log, 7)); !errors.As(err, &sc) || sc.Size != 5 {
		t.Fatalf("a wrong old size: %v", err)
	}
	if err := c.Add(ctx, 5, nil, checkpoint(t, log, 5)); !errors.Is(err, witness.ErrRefused) {
		t.Fatalf("the witnessed size with another root: %v", err)
	}
	stranger, _ := signer(t)
	if err := c.Add(ctx, 0, nil, checkpoint(t, stranger, 3)); !errors.Is(err, witness.ErrRefused) {
		t.Fatalf("a log the witness does not keep: %v", err)
	}
	// Restarted from its state, it still holds size 5.
	s2, err := witness.New("w1", wkey, state, []ed25519.PublicKey{lpub})
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(s2)
	defer ts2.Close()
	if err := (&witness.Client{URL: ts2.URL, Key: wpub}).Add(ctx, 0, nil, checkpoint(t, log, 9)); !errors.As(err, &sc) || sc.Size != 5 {
		t.Fatalf("after a restart: %v", err)
	}
}

// TestRedTeamWitnessAnswerSplice: the witness signs its answer to GET
// /checkpoint/<log ID>?challenge=C over the challenge, the log ID and the
// answer. A network attacker who sees a store's challenge asks the witness
// itself for the log ID followed by a newline and the answer it wants the
// store to believe (a checkpoint the log signed, older than what the
// witness holds): the witness's signed "none" for that ID must not verify
// as that answer for the real log.
func TestRedTeamWitnessAnswerSplice(t *testing.T) {
	ctx := context.Background()
	wkey, wpub := signer(t)
	log, lpub := signer(t)
	s, err := witness.New("w1", wkey, filepath.Join(t.TempDir(), "state.json"), []ed25519.PublicKey{lpub})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	if err := (&witness.Client{URL: ts.URL, Key: wpub}).Add(ctx, 0, nil, checkpoint(t, log, 5)); err != nil {
		t.Fatal(err)
	}
	lie, err := json.Marshal(checkpoint(t, log, 3)) // signed by the log, never held by the witness
	if err != nil {
		t.Fatal(err)
	}
	lie = append(lie, '\n')
	mitm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/checkpoint/")
		u := ts.URL + "/checkpoint/" + url.PathEscape(id+"\n"+string(lie[:len(lie)-1])) + "?challenge=" + r.URL.Query().Get("challenge")
		resp, err := http.Get(u)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.Header().Set(witness.AnswerHeader, resp.Header.Get(witness.AnswerHeader))
		_, _ = w.Write(lie)
	}))
	defer mitm.Close()
	got, err := (&witness.Client{URL: mitm.URL, Key: wpub}).Latest(ctx, lpub)
	if err == nil && got != nil && got.Size == 3 {
		t.Fatal("a network attacker made the witness's signature say it holds a checkpoint it never held")
	}
	if err == nil {
		t.Fatalf("an answer not from the witness was taken: %+v", got)
	}
}

// TestRedTeamWitnessStateFileIsTrusted: a gap, held here. The witness's
// state file is as trusted as its key: whoever can write it (no key) and
// deletes it, or puts back an older copy, makes the witness restart
// holding less, and it then cosigns a log cut back before what it had
// witnessed. Keep the state file where only the witness's account writes.
func TestRedTeamWitnessStateFileIsTrusted(t *testing.T) {
	ctx := context.Background()
	wkey, wpub := signer(t)
	log, lpub := signer(t)
	state := filepath.Join(t.TempDir(), "state.json")
	start := func() *httptest.Server {
		s, err := witness.New("w1", wkey, state, []ed25519.PublicKey{lpub})
		if err != nil {
			t.Fatal(err)
		}
		return httptest.NewServer(s)
	}
	ts := start()
	if err := (&witness.Client{URL: ts.URL, Key: wpub}).Add(ctx, 0, nil, checkpoint(t, log, 5)); err != nil {
		t.Fatal(err)
	}
	ts.Close()
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	ts = start()
	defer ts.Close()
	if err := (&witness.Client{URL: ts.URL, Key: wpub}).Add(ctx, 0, nil, checkpoint(t, log, 3)); err != nil {
		t.Fatalf("the known gap changed: a witness whose state was deleted refuses a log cut back (%v); update docs/threat-model.md and this test", err)
	}
}

// TestRedTeamWitnessSlowBody: a client sends its request's headers and
// then its body a byte at a time (slowloris): the witness closes the
// connection once its read bound passes instead of holding it (and a
// descriptor) for as long as the client likes.
func TestRedTeamWitnessSlowBody(t *testing.T) {
	defer witness.SetReadTimeout(300 * time.Millisecond)()
	wkey, _ := signer(t)
	_, lpub := signer(t)
	s, err := witness.New("w1", wkey, filepath.Join(t.TempDir(), "state.json"), []ed25519.PublicKey{lpub})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := witness.HTTPServer(s)
	go srv.Serve(ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 1000\r\n\r\nold 0\n")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the witness still reads a body sent a byte at a time after 5 s")
	}
}
