package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// counts is what a refused request must not change.
func counts(t *testing.T, e *pedigree.Engine) [2]uint64 {
	n, err := hatch.Graph(e).Count(0)
	if err != nil {
		t.Fatal(err)
	}
	size, err := hatch.Log(e).Size()
	if err != nil {
		t.Fatal(err)
	}
	return [2]uint64{uint64(n), size}
}

func TestBadRequests(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	h := server.New(w.E, nil).Handler()
	ctx := t.Context()
	prompt := w.Record("user:alice", "s", "p", nil)
	st, _ := w.E.Envelopes().Statement(ctx, pedigree.Entry{Principal: "agent:planner", Content: []byte("x"), Parents: []lineage.Parent{}})
	forged, _, _ := lineage.Sign(w.Keys["tool:gmail_read"], st) // the planner's name, the mail tool's key
	good, _, _ := lineage.Sign(w.Keys["agent:planner"], st)
	cst, _, _ := w.E.Envelopes().CallStatement(ctx, pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "pay"})
	call, _, _ := lineage.Sign(w.Keys["agent:planner"], cst)
	body := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	cases := []struct {
		name, method, path, body string
		status                   int
		kind                     string
	}{
		{"malformed JSON", "POST", "/v1/entries", `{"envelope":`, 400, "malformed"},
		{"unknown field", "POST", "/v1/entries", body(map[string]any{"envelope": json.RawMessage(good), "tier": "internal"}), 400, "malformed"},
		{"trailing data", "POST", "/v1/entries", body(map[string]any{"envelope": json.RawMessage(good)}) + "{}", 400, "malformed"},
		{"oversized body", "POST", "/v1/entries", `{"envelope":"` + strings.Repeat("a", server.MaxRequestBytes) + `"}`, 413, "too_large"},
		{"bad signature", "POST", "/v1/entries", body(map[string]any{"envelope": json.RawMessage(forged)}), 403, "bad_signature"},
		{"envelope not an object", "POST", "/v1/entries", `{"envelope":"x"}`, 400, "malformed"},
		{"unknown entry", "GET", "/v1/entries/" + strings.Repeat("ab", 32), "", 404, "unknown_entry"},
		{"short prefix", "GET", "/v1/resolve/abc", "", 400, "malformed"},
		{"unknown decision", "GET", "/v1/decisions/" + strings.Repeat("cd", 32), "", 404, "unknown_decision"},
		{"wrong method", "GET", "/v1/entries", "", 405, "method"},
		{"wrong method on check", "PUT", "/v1/check", "", 405, "method"},
		{"no such endpoint", "GET", "/v1/nothing", "", 404, "not_found"},
		{"no registry change endpoint", "POST", "/v1/registry", `{}`, 405, "method"},
		{"no principal endpoint", "POST", "/v1/registry/principals", `{"id":"user:eve"}`, 404, "not_found"},
		{"check of a non-call", "POST", "/v1/check", body(map[string]any{"call": json.RawMessage(good)}), 400, "malformed"},
		{"check with unknown fields", "POST", "/v1/check", body(map[string]any{"call": json.RawMessage(call), "decision": "allow"}), 400, "malformed"},
		{"approval of garbage", "POST", "/v1/approvals", `{"envelope":{}}`, 400, "malformed"},
		{"recall of unknown entry", "POST", "/v1/recall", body(map[string]any{"session": "s", "ids": []string{strings.Repeat("9", 64)}}), 404, "unknown_entry"},
		{"trace with a negative depth", "GET", "/v1/trace/" + prompt.ID + "?max_depth=-1", "", 400, "malformed"},
		{"forged checkpoint", "POST", "/v1/log/checkpoints", `{"checkpoint":{"size":1,"root":"00","time":"2026-01-01T00:00:00Z","signature":"AAAA"}}`, 400, "bad_key"},
		{"prove before a checkpoint", "GET", "/v1/log/prove/" + prompt.ID, "", 404, "no_checkpoint"},
	}
	before := counts(t, w.E)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
			var e struct{ Error, Kind string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("not a JSON error body: %q", rec.Body.String())
			}
			if rec.Code != c.status || e.Kind != c.kind || e.Error == "" {
				t.Fatalf("got %d %q %q, want %d %s", rec.Code, e.Kind, e.Error, c.status, c.kind)
			}
		})
	}
	if after := counts(t, w.E); after != before {
		t.Fatalf("refused requests stored something: %v -> %v", before, after)
	}
	// Still serving, and the good request works.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/entries", strings.NewReader(body(map[string]any{"envelope": json.RawMessage(good)}))))
	if rec.Code != 200 {
		t.Fatalf("good insert after bad ones: %d %s", rec.Code, rec.Body)
	}
}

func TestMetricsAndReadiness(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	s := server.New(w.E, nil)
	h := s.Handler()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	ctx := t.Context()
	cst, _, _ := w.E.Envelopes().CallStatement(ctx, pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "pay"})
	call, _, _ := lineage.Sign(w.Keys["agent:planner"], cst)
	b, _ := json.Marshal(map[string]any{"call": json.RawMessage(call)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/check", bytes.NewReader(b)))
	var d gate.Decision
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &d) != nil || d.Decision != gate.Allow {
		t.Fatalf("check: %d %s", rec.Code, rec.Body)
	}
	_, m := get("/metrics")
	for _, want := range []string{`pedigree_decisions_total{decision="allow"} 1`, "pedigree_check_seconds_count 1", "pedigree_entries_recorded_total 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	s.Drain()
	if code, _ := get("/readyz"); code != 503 {
		t.Fatalf("readyz while draining: %d", code)
	}
}

func TestRunOnSocket(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, w.E, server.Options{Addr: "127.0.0.1:0", Ready: func(s, a string) { ready <- [2]string{s, a} }})
	}()
	var where [2]string
	select {
	case where = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	fi, err := os.Stat(where[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v %v", where[0], fi.Mode(), err)
	}
	// TCP on loopback answers too.
	resp, err := http.Get("http://" + where[1] + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("tcp healthz: %v", err)
	}
	resp.Body.Close()
	c, err := server.Dial(t.Context(), w.Dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Record(t.Context(), w.Keys["user:alice"], pedigree.Entry{Principal: "user:alice", Session: "s", Content: []byte("over the socket")})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("drain: %v", err)
	}
	for _, f := range []string{where[0], filepath.Join(w.Dir, server.InfoFile)} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left behind", f)
		}
	}
	if _, err := server.Dial(t.Context(), w.Dir, nil); err == nil {
		t.Fatal("a client still reached the server after shutdown")
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := hatch.Graph(w.E).Node(n.ID); err != nil {
		t.Fatalf("the entry recorded over the socket is gone: %v", err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, a := range []string{"0.0.0.0:7070", "10.0.0.1:80", ":8080", "example.com:80", "nonsense"} {
		if err := server.CheckLoopback(a); err == nil {
			t.Errorf("%s accepted", a)
		}
	}
	for _, a := range []string{"127.0.0.1:7070", "[::1]:80", "localhost:9"} {
		if err := server.CheckLoopback(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
}

func FuzzHandler(f *testing.F) {
	f.Add("POST", "/v1/entries", `{"envelope":{"payloadType":"x","payload":"","signatures":[]}}`)
	f.Add("POST", "/v1/check", `{"call":{},"arg_sources":{"a":["b"]}}`)
	f.Add("POST", "/v1/recall", `{"session":"s","ids":["abc"]}`)
	f.Add("GET", "/v1/trace/abcdefabcdef", ``)
	w := enginetest.New(f, enginetest.Default)
	h := server.New(w.E, nil).Handler()
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t\r\n%?#") {
			return
		}
		req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != 507 {
			b, _ := io.ReadAll(rec.Body)
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, b)
		}
	})
}

// TestRunIdleExit: a server with IdleExit stops by itself once idle, and
// says so in serve.json while it runs; the shortest IdleExit is no panic of
// its ticker (a tick is at least 10 ms).
func TestRunIdleExit(t *testing.T) {
	for _, idle := range []time.Duration{time.Nanosecond, 200 * time.Millisecond} {
		w := enginetest.NewOnDisk(t, enginetest.Default)
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- server.Run(t.Context(), w.E, server.Options{IdleExit: idle, Ready: func(string, string) { close(ready) }})
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatal(err)
		}
		if idle > 100*time.Millisecond {
			b, _ := os.ReadFile(filepath.Join(w.Dir, server.InfoFile))
			if !strings.Contains(string(b), `"idle_exit":"`+idle.String()+`"`) {
				t.Errorf("serve.json of an idle-exit server: %s", b)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("idle %s: %v", idle, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("idle %s: the server did not stop", idle)
		}
	}
}
