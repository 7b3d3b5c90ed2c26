package pedigree_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
	"github.com/pedigree-ai/pedigree/testkit/tampertest"
)

// mitm is a network attacker between a store and its HTTP witness: it
// passes every request on, keeps the witness's first answer to GET
// /checkpoint/, and, once told to, answers GET with what it chose.
type mitm struct {
	first atomic.Pointer[[]byte]
	lie   atomic.Value // func(w http.ResponseWriter, first []byte)
	post  atomic.Value // func(w http.ResponseWriter): an answer to POST instead of the witness's
}

func newMITM(t *testing.T, upstream string) (*mitm, string) {
	t.Helper()
	m := &mitm{}
	up, _ := url.Parse(upstream)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lie, ok := m.lie.Load().(func(http.ResponseWriter, []byte)); ok && lie != nil && r.Method == http.MethodGet {
			var first []byte
			if p := m.first.Load(); p != nil {
				first = *p
			}
			lie(w, first)
			return
		}
		if lie, ok := m.post.Load().(func(http.ResponseWriter)); ok && lie != nil && r.Method == http.MethodPost {
			lie(w)
			return
		}
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, up.String()+r.URL.RequestURI(), r.Body)
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && m.first.Load() == nil {
			c := append([]byte(nil), b...)
			m.first.Store(&c)
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}))
	t.Cleanup(ts.Close)
	return m, ts.URL
}

// TestRedTeamHTTPWitnessAnswerReplayedHidesACut: a writer of the data
// directory cuts the log's last leaves (every row rebuilt to match), and a
// network attacker between the store and its HTTP witness answers the
// store's GET /checkpoint/ with "none" or with an older genuine answer it
// kept. The store must not take either for what the witness holds: the
// answer is bound to the store's question and signed by the witness.
func TestRedTeamHTTPWitnessAnswerReplayedHidesACut(t *testing.T) {
	for name, lie := range map[string]func(http.ResponseWriter, []byte){
		"none": func(w http.ResponseWriter, _ []byte) { http.NotFound(w, nil) },
		"an older answer": func(w http.ResponseWriter, first []byte) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(first)
		},
	} {
		t.Run(name, func(t *testing.T) {
			wurl, start, key := httpWitness(t)
			m, murl := newMITM(t, wurl)
			pub, _ := key.Ed25519()
			w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithWitnessHTTP(murl, pub))
			start(w.Dir)
			w.SkipVerify = true
			_, mem := deniedSession(t, w)
			w.E.Close() // witnessed at close
			w.E = nil
			if err := w.Reopen(); err != nil { // the store asks the witness: the attacker keeps this answer
				t.Fatal(err)
			}
			if m.first.Load() == nil {
				t.Fatal("the store never asked its witness")
			}
			last := sendAgain(w, "agent:planner", mem.ID)
			w.E.Close()
			w.E = nil
			if _, err := tampertest.Rebuild(t.Context(), w.Dir, tampertest.Edit{Drop: map[string]bool{last.ID: true}}); err != nil {
				t.Fatal(err)
			}
			m.lie.Store(lie)
			err := w.Reopen()
			if err == nil {
				got := problems(t, w)
				_, werr := w.TryRecord("user:alice", "s", "more", nil)
				if !strings.Contains(got, "witness") || werr == nil {
					t.Fatalf("a cut store passes against a replayed witness answer: verify %q, write %v", got, werr)
				}
				if !errors.Is(werr, pedigree.ErrWitness) {
					t.Fatalf("a write: %v", werr)
				}
			}
		})
	}
}

// TestRedTeamHTTPWitnessForgedRefusalIsNotARewrite: a network attacker
// between a store and its HTTP witness answers one add-checkpoint with a
// 409 naming a size beyond the log, or with a 422 or 403 refusal. None is
// signed: the store must not take it for a rewrite (refusing every write
// until it is restarted, verify naming a rewrite that did not happen); it
// asks the witness (whose answer is signed) what it holds, and writes
// again once the witness is reached.
func TestRedTeamHTTPWitnessForgedRefusalIsNotARewrite(t *testing.T) {
	for name, lie := range map[string]func(http.ResponseWriter){
		"409 beyond the log": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/x.tlog.size")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte("1000000\n"))
		},
		"422": func(w http.ResponseWriter) {
			http.Error(w, "the consistency proof does not verify", http.StatusUnprocessableEntity)
		},
		"403": func(w http.ResponseWriter) { http.Error(w, "not a log this witness keeps", http.StatusForbidden) },
	} {
		t.Run(name, func(t *testing.T) {
			wurl, start, key := httpWitness(t)
			m, murl := newMITM(t, wurl)
			pub, _ := key.Ed25519()
			w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithWitnessHTTP(murl, pub), pedigree.WithCheckpointEvery(1, time.Hour))
			start(w.Dir)
			w.SkipVerify = true
			if _, err := w.TryRecord("user:alice", "s", "one", nil); err != nil {
				t.Fatal(err)
			}
			m.post.Store(lie)
			_, _ = w.TryRecord("user:alice", "s", "two", nil) // its checkpoint meets the attacker
			m.post.Store((func(http.ResponseWriter))(nil))
			if _, err := w.TryRecord("user:alice", "s", "three", nil); err != nil {
				t.Fatalf("a write once the witness is reached again: %v", err)
			}
			if got := problems(t, w); got != "" {
				t.Fatalf("verify names a rewrite that did not happen: %q", got)
			}
		})
	}
}

// TestRedTeamWitnessFileInsideTheDataDirectory: a witness file inside the
// data directory (named there, or through a link to it) is one its
// writers can roll back or delete: the store refuses it at open instead
// of holding itself to it.
func TestRedTeamWitnessFileInsideTheDataDirectory(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.SkipVerify = true
	w.E.Close()
	w.E = nil
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(w.Dir, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(w.Dir, "witness.json"), filepath.Join(link, "witness.json")} {
		e, err := pedigree.Open(t.Context(), w.Dir, pedigree.WithWitnessFile(p))
		if err == nil {
			e.Close()
		}
		if !errors.Is(err, pedigree.ErrWitness) {
			t.Errorf("a witness file at %s: %v, want %v", p, err, pedigree.ErrWitness)
		}
	}
	e, err := pedigree.Open(t.Context(), w.Dir, pedigree.WithWitnessFile(filepath.Join(t.TempDir(), "witness.json")))
	if err != nil {
		t.Fatalf("a witness file outside: %v", err)
	}
	e.Close()
}
