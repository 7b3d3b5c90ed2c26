package pedigree_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/witness"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
	"github.com/pedigree-ai/pedigree/testkit/tampertest"
)

// httpWitness starts an HTTP witness (its own key, its state in a file)
// that keeps the log whose engine key is made for dir once it exists.
func httpWitness(t *testing.T) (string, func(dir string) *witness.Server, *registry.Signer) {
	t.Helper()
	key, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "witness-state.json")
	// Until the log's key exists, the witness keeps another log: it
	// answers (signed) that it holds nothing of this one.
	other, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _ := other.Ed25519()
	s0, err := witness.New("test-witness", key, state, []ed25519.PublicKey{otherPub})
	if err != nil {
		t.Fatal(err)
	}
	var srv atomic.Pointer[witness.Server]
	srv.Store(s0)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	start := func(dir string) *witness.Server {
		ek, err := registry.LoadSigner(pedigree.DefaultEngineKeyFile(dir))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := ek.Ed25519()
		s, err := witness.New("test-witness", key, state, []ed25519.PublicKey{pub})
		if err != nil {
			t.Fatal(err)
		}
		srv.Store(s)
		return s
	}
	return ts.URL, start, key
}

// TestHTTPWitnessNamesACutTail: as TestWitnessNamesACutTail, with an HTTP
// witness outside the host: the engine hands it every checkpoint with a
// consistency proof, it keeps the latest, and a store cut behind it is
// named by verify (which asks the witness) and refuses every write.
func TestHTTPWitnessNamesACutTail(t *testing.T) {
	url, start, key := httpWitness(t)
	pub, _ := key.Ed25519()
	w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithWitnessHTTP(url, pub))
	start(w.Dir)
	w.SkipVerify = true
	_, mem := deniedSession(t, w)
	sendAgain(w, "agent:planner", mem.ID) // a checkpoint: a proof from the size witnessed before
	last := sendAgain(w, "agent:planner", mem.ID)
	w.E.Close() // the tail is witnessed at close
	w.E = nil
	if _, err := tampertest.Rebuild(t.Context(), w.Dir, tampertest.Edit{Drop: map[string]bool{last.ID: true}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if got := problems(t, w); !strings.Contains(got, "behind the checkpoint kept elsewhere") {
		t.Fatalf("verify against the HTTP witness: %q", got)
	}
	if _, err := w.TryRecord("user:alice", "s", "more", nil); !errors.Is(err, pedigree.ErrWitness) {
		t.Fatalf("a write after the cut: %v", err)
	}
}

// TestHTTPWitnessKeepsASpentApprovalSpent: the use of an approval is
// witnessed (cosigned) before the call is allowed; cut from the tail, it
// buys no second allow. And a witness that cannot be reached after a use
// denies the call.
func TestHTTPWitnessKeepsASpentApprovalSpent(t *testing.T) {
	url, start, key := httpWitness(t)
	pub, _ := key.Ed25519()
	w := enginetest.NewOnDisk(t, enginetest.Default, pedigree.WithWitnessHTTP(url, pub), pedigree.WithCheckpointEvery(1000, time.Hour))
	start(w.Dir)
	w.SkipVerify = true
	d, mem := deniedSession(t, w)
	if _, err := w.E.Approve(t.Context(), w.Keys["user:alice"], "user:alice", d.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	use := sendAgain(w, "agent:planner", mem.ID)
	if use.Decision != gate.Allow {
		t.Fatalf("the approved call: %s", use.Decision)
	}
	w.Crash()
	if _, err := tampertest.Rebuild(t.Context(), w.Dir, tampertest.Edit{Drop: map[string]bool{use.ID: true}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if again, err := w.TryCheck("agent:planner", pedigree.Call{Session: "s", Tool: "send_money", Args: []byte(`{"to":"999"}`), Justification: []string{mem.ID}}); err == nil && again.Decision == gate.Allow {
		t.Fatalf("the approval allowed a second call after its use was cut from the tail")
	}
}

// BenchmarkRecordHTTPWitness measures one recorded entry on disk (an
// fsync per commit) with no witness, a file witness and an HTTP witness
// on loopback (a consistency proof and a cosignature every
// DefaultCheckpointEvery leaves).
//
//	go test -run '^$' -bench BenchmarkRecordHTTPWitness .
func BenchmarkRecordHTTPWitness(b *testing.B) {
	for _, kind := range []string{"none", "file", "http"} {
		b.Run(kind, func(b *testing.B) {
			var opts []pedigree.Option
			var start func(string) *witness.Server
			switch kind {
			case "file":
				opts = append(opts, pedigree.WithWitnessFile(filepath.Join(b.TempDir(), "witness.json")))
			case "http":
				key, _, _ := registry.GenerateSigner(nil)
				pub, _ := key.Ed25519()
				var srv atomic.Pointer[witness.Server]
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if s := srv.Load(); s != nil {
						s.ServeHTTP(w, r)
						return
					}
					http.NotFound(w, r)
				}))
				b.Cleanup(ts.Close)
				state := filepath.Join(b.TempDir(), "state.json")
				start = func(dir string) *witness.Server {
					ek, err := registry.LoadSigner(pedigree.DefaultEngineKeyFile(dir))
					if err != nil {
						b.Fatal(err)
					}
					epub, _ := ek.Ed25519()
					s, err := witness.New("bench", key, state, []ed25519.PublicKey{epub})
					if err != nil {
						b.Fatal(err)
					}
					srv.Store(s)
					return s
				}
				opts = append(opts, pedigree.WithWitnessHTTP(ts.URL, pub))
			}
			w := enginetest.NewOnDisk(b, enginetest.Default, opts...)
			if start != nil {
				start(w.Dir)
			}
			w.SkipVerify = true
			ctx := context.Background()
			key := w.Keys["user:alice"]
			b.ResetTimer()
			for i := range b.N {
				if _, err := w.E.Record(ctx, key, pedigree.Entry{Principal: "user:alice", Session: "s", Content: fmt.Appendf(nil, "entry %d", i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
