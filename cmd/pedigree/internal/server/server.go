package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"strings"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/registry"
)

// Server serves one engine.
type Server struct {
	e        *pedigree.Engine
	log      *slog.Logger
	mux      *http.ServeMux
	draining atomic.Bool
	metrics  *metrics
	// claude answers Claude Code's http hooks, when enabled.
	claude      *hook.Handler
	claudeToken string
	// ui serves the page, when enabled (EnableUI).
	ui *ui
	// listed is the routes the server serves, as it lists them (release.go).
	listed []string
}

type metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	entries   prometheus.Counter
	errors    *prometheus.CounterVec
	check     prometheus.Histogram
	record    prometheus.Histogram
	// reviews: decisions pending, approved and rejected, read from the
	// store at each scrape (they outlive the process).
	reviews *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pedigree_decisions_total", Help: "Gate decisions by result."}, []string{"decision"})
	m.entries = prometheus.NewCounter(prometheus.CounterOpts{Name: "pedigree_entries_recorded_total", Help: "Entries recorded."})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pedigree_errors_total", Help: "Requests that failed, by kind."}, []string{"kind"})
	buckets := prometheus.ExponentialBuckets(50e-6, 2, 14) // 50 µs to 0.4 s
	m.check = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pedigree_check_seconds", Help: "Whole gate checks.", Buckets: buckets})
	m.record = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pedigree_record_seconds", Help: "Entry inserts.", Buckets: buckets})
	m.reviews = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pedigree_decisions_reviewed",
		Help: "Denies and asks by review state: pending (nobody answered yet), approved, rejected."}, []string{"state"})
	m.reg.MustRegister(m.decisions, m.entries, m.errors, m.check, m.record, m.reviews)
	return m
}

// New wraps an open engine.
func New(e *pedigree.Engine, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{e: e, log: log, mux: http.NewServeMux(), metrics: newMetrics()}
	s.metrics.fleet(e)
	// Refused writes (forged signatures, unknown principals, bad
	// approvals): counted by the engine, which logs each one.
	s.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pedigree_refused_writes_total",
		Help: "Writes refused as attempts (bad signature, unknown principal, bad key, bad approval, refused call); see 'pedigree log refusals'."},
		func() float64 { return float64(e.RefusalCount()) }))
	s.routes()
	return s
}

// EnableUI serves the page (see ui.go) under /ui/ and the login-link API.
// origin is where the browser reaches it: "http://127.0.0.1:PORT".
func (s *Server) EnableUI(origin string, o UIOptions) error {
	if o.Dir == "" {
		o.Dir = s.e.Dir()
	}
	u, err := newUI(s.e, s.e.Log(), o)
	if err != nil {
		return err
	}
	u.origin = origin
	s.ui = u
	return nil
}

// Drain marks the server as draining: /readyz fails, so a supervisor stops
// sending work, while in-flight requests finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s }

// ServeHTTP logs every request with constant keys.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w, status: 200}
	s.mux.ServeHTTP(rw, r)
	s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "duration_us", time.Since(start).Microseconds())
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// route registers a handler for one method; any other method is a 405 with
// a JSON body.
func (s *Server) route(method, path string, h func(w http.ResponseWriter, r *http.Request) error) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			s.fail(w, http.StatusMethodNotAllowed, "method", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		if err := h(w, r); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				s.fail(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body larger than %d bytes", mbe.Limit))
				return
			}
			var bad badRequest
			if errors.As(err, &bad) {
				s.fail(w, http.StatusBadRequest, "malformed", err.Error())
				return
			}
			kind, status := classify(err)
			s.fail(w, status, kind, err.Error())
		}
	})
}

func (s *Server) fail(w http.ResponseWriter, status int, kind, msg string) {
	s.metrics.errors.WithLabelValues(kind).Inc()
	if status >= 500 {
		s.log.Error("request failed", "kind", kind, "error", msg)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorResponse{Error: msg, Kind: kind})
}

// badRequest is a request that does not decode.
type badRequest struct{ err error }

func (b badRequest) Error() string { return "malformed request: " + b.err.Error() }

// decode reads a JSON body strictly: unknown fields and trailing data are
// errors.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest{err}
	}
	if dec.More() {
		return badRequest{errors.New("trailing data after the JSON body")}
	}
	return nil
}

func reply(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

func (s *Server) routes() {
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.URL.Path)
	})
	s.route("GET", "/healthz", func(w http.ResponseWriter, r *http.Request) error {
		return reply(w, map[string]any{"ok": true})
	})
	s.route("GET", "/readyz", func(w http.ResponseWriter, r *http.Request) error {
		if s.draining.Load() {
			s.fail(w, http.StatusServiceUnavailable, "draining", "the server is shutting down")
			return nil
		}
		reg, err := s.e.Registry(r.Context())
		if err != nil {
			return err
		}
		if !reg.Frozen {
			s.fail(w, http.StatusServiceUnavailable, "not_frozen", registry.ErrNotFrozen.Error())
			return nil
		}
		if fs, ok := s.e.Fleet().Status(); ok && !fs.Ready {
			// A fleet node that lags or is cut off still answers (it
			// fails closed on what it has not applied), but a load
			// balancer should send work elsewhere.
			s.fail(w, http.StatusServiceUnavailable, "fleet_lagging", fs.Why)
			return nil
		}
		return reply(w, map[string]any{"ready": true})
	})
	metricsHandler := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	s.route("GET", "/metrics", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.countReviews(r.Context()); err != nil {
			return err
		}
		metricsHandler.ServeHTTP(w, r)
		return nil
	})
	for _, v := range served() {
		s.listed = append(s.listed, v.String())
		s.route(v.method, v.pattern, func(w http.ResponseWriter, r *http.Request) error { return v.serve(s, w, r) })
	}
	s.mux.HandleFunc(claudeHookPath, s.claudeHook)
}

// claudeHookPath is the route of Claude Code's http hooks.
const claudeHookPath = "/v1/hooks/claude"

// EnableClaudeHooks answers Claude Code's http hooks on POST
// /v1/hooks/claude, signing with the hook's keys in the data directory
// (written by 'pedigree hook claude init'): the one route through which the
// server signs. Requests must carry the directory's bearer token.
func (s *Server) EnableClaudeHooks() error {
	dir := s.e.Dir()
	token, err := hook.Token(dir)
	if err != nil {
		return err
	}
	h, err := hook.New(context.Background(), s.e, dir)
	if err != nil {
		return err
	}
	s.claude, s.claudeToken = h, token
	return nil
}

// claudeHook answers one Claude Code http hook event. Claude Code lets a
// call through when an http hook fails (a non-2xx status, a timeout), so
// every failure is answered with status 200 and a body that blocks: a
// PreToolUse is denied, a prompt is blocked, and an event that cannot be
// read stops Claude Code.
func (s *Server) claudeHook(w http.ResponseWriter, r *http.Request) {
	var ev *hook.Event
	err := func() error {
		switch {
		case r.Method != "POST":
			return fmt.Errorf("%s %s: use POST", r.Method, r.URL.Path)
		case r.Header.Get("Origin") != "" || !loopbackHost(r.Host):
			return errors.New("a request from a browser, or to a Host that is not loopback, is refused")
		case s.claude == nil:
			return errors.New("this server does not answer Claude Code hooks: start it with 'pedigree serve --claude-hooks'")
		case !bearer(r, s.claudeToken):
			return errors.New("the request does not carry this data directory's hook token (see 'pedigree hook claude settings --http')")
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, hook.MaxEventBytes))
		if err != nil {
			return fmt.Errorf("%w: %v", hook.ErrEvent, err)
		}
		if ev, err = hook.ParseEvent(b); err != nil {
			return err
		}
		ans, err := s.claude.Handle(r.Context(), ev)
		if err != nil {
			return err
		}
		if ans == nil {
			ans = &hook.Answer{}
		}
		return reply(w, ans)
	}()
	if err != nil {
		s.metrics.errors.WithLabelValues("hook").Inc()
		s.log.Warn("claude hook blocked", "error", err.Error())
		reply(w, hook.Block(ev, err))
	}
}

func bearer(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func intParam(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest{fmt.Errorf("%s=%q is not a whole number", name, v)}
	}
	return n, nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// postUILogin is the page's login: a one-time link to the page for a
// bearer of the token, from a server started with --ui.
var postUILogin = verb{"POST", uiLoginAPI, (*Server).uiLogin}

func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) error {
	if s.ui == nil {
		return badRequest{errors.New("the page is not served: start the server with --ui")}
	}
	var req struct {
		Path string `json:"path,omitempty"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	link, err := s.ui.LoginURL(req.Path)
	if err != nil {
		return err
	}
	reply(w, map[string]string{"url": link})
	return nil
}

// countReviews sets the review gauges from the store.
func (s *Server) countReviews(ctx context.Context) error {
	ps, err := s.e.Pending(ctx)
	if err != nil {
		return err
	}
	rs, err := s.e.Reviews(ctx)
	if err != nil {
		return err
	}
	n := map[string]int{gate.Approved: 0, gate.Rejected: 0}
	for _, r := range rs {
		n[r.Outcome]++
	}
	s.metrics.reviews.WithLabelValues("pending").Set(float64(len(ps)))
	s.metrics.reviews.WithLabelValues(gate.Approved).Set(float64(n[gate.Approved]))
	s.metrics.reviews.WithLabelValues(gate.Rejected).Set(float64(n[gate.Rejected]))
	return nil
}
