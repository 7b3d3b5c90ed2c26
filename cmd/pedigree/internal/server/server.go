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
	"github.com/pedigree-ai/pedigree/lineage"
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
	u, err := newUI(s.e, o)
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
	s.route("GET", "/v1/registry", s.registry)
	s.route("GET", "/v1/context/{session}", func(w http.ResponseWriter, r *http.Request) error {
		ids, err := s.e.Context(r.Context(), r.PathValue("session"))
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"ids": nonNil(ids)})
	})
	s.route("GET", "/v1/context-ref/{session}", func(w http.ResponseWriter, r *http.Request) error {
		session := r.PathValue("session")
		if !lineage.ValidSession(session) {
			return fmt.Errorf("%w: %.64q is not a session a call could name", lineage.ErrMalformed, session)
		}
		ref, err := s.e.ContextRef(r.Context(), session)
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"context": ref})
	})
	s.route("GET", "/v1/resolve/{prefix}", func(w http.ResponseWriter, r *http.Request) error {
		id, err := s.e.Resolve(r.Context(), r.PathValue("prefix"))
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"id": id})
	})
	s.route("POST", "/v1/entries", s.insert)
	s.route("GET", "/v1/content/{digest}", func(w http.ResponseWriter, r *http.Request) error {
		ids, err := s.e.ByContent(r.Context(), r.PathValue("digest"))
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"ids": nonNil(ids)})
	})
	s.route("GET", "/v1/entries/{id}", s.show)
	s.route("POST", "/v1/recall", func(w http.ResponseWriter, r *http.Request) error {
		var req recallRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		if err := s.e.Recall(r.Context(), req.Session, req.IDs); err != nil {
			return err
		}
		return reply(w, map[string]any{"recalled": len(req.IDs)})
	})
	s.route("POST", "/v1/check", s.check)
	s.route("POST", "/v1/approvals", func(w http.ResponseWriter, r *http.Request) error {
		var req approveRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		n, err := s.e.Envelopes().Approve(r.Context(), req.Envelope)
		if err != nil {
			return err
		}
		return reply(w, n)
	})
	s.route("POST", "/v1/rejections", func(w http.ResponseWriter, r *http.Request) error {
		var req approveRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		n, err := s.e.Envelopes().Reject(r.Context(), req.Envelope)
		if err != nil {
			return err
		}
		return reply(w, n)
	})
	s.route("GET", "/v1/pending", func(w http.ResponseWriter, r *http.Request) error {
		ps, err := s.e.Pending(r.Context())
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"pending": nonNil(ps)})
	})
	s.route("GET", "/v1/reviews", func(w http.ResponseWriter, r *http.Request) error {
		rs, err := s.e.Reviews(r.Context())
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"reviews": nonNil(rs)})
	})
	s.route("GET", "/v1/decisions", func(w http.ResponseWriter, r *http.Request) error {
		limit, err := intParam(r, "limit")
		if err != nil {
			return err
		}
		ds, err := s.e.Decisions(r.Context(), pedigree.DecisionQuery{Limit: limit, Session: r.URL.Query().Get("session")})
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"decisions": nonNil(ds)})
	})
	s.route("GET", "/v1/decisions/{id}", func(w http.ResponseWriter, r *http.Request) error {
		d, err := s.e.Decision(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		return reply(w, d)
	})
	s.route("GET", "/v1/decisions/{id}/subject", func(w http.ResponseWriter, r *http.Request) error {
		p, err := s.e.Subject(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		return reply(w, p)
	})
	s.route("GET", "/v1/decisions/{id}/reevaluate", func(w http.ResponseWriter, r *http.Request) error {
		re, err := s.e.Reevaluate(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		return reply(w, re)
	})
	s.route("GET", "/v1/trace/{id}", s.trace)
	s.route("GET", "/v1/refusals", func(w http.ResponseWriter, r *http.Request) error {
		limit, err := intParam(r, "limit")
		if err != nil {
			return err
		}
		rs, err := s.e.Refusals(r.Context(), limit)
		if err != nil {
			return err
		}
		return reply(w, refusalsResponse{Refusals: rs})
	})
	s.mux.HandleFunc(claudeHookPath, s.claudeHook)
	s.route("POST", uiLoginAPI, s.uiLogin)
	s.route("POST", "/v1/verify", func(w http.ResponseWriter, r *http.Request) error {
		var req verifyRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		// Verifying a large store takes longer than a write timeout.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		rep, err := s.e.Log().VerifyCheckpoints(r.Context(), req.Checkpoints)
		if err != nil {
			return err
		}
		return reply(w, rep)
	})
	s.route("GET", "/v1/trajectory/{session}", func(w http.ResponseWriter, r *http.Request) error {
		st, err := s.e.Trajectory(r.Context(), r.PathValue("session"))
		if err != nil {
			return err
		}
		return reply(w, trajectoryResponse{State: *st, Calls: nonNil(st.Calls), Alerts: nonNil(st.Alerts)})
	})
	s.route("GET", "/v1/log/head", func(w http.ResponseWriter, r *http.Request) error {
		size, root, err := s.e.Log().Head(r.Context())
		if err != nil {
			return err
		}
		return reply(w, headResponse{Size: size, Root: root})
	})
	s.route("POST", "/v1/log/checkpoints", func(w http.ResponseWriter, r *http.Request) error {
		var req checkpointRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		if err := s.e.Log().AddCheckpoint(r.Context(), &req.Checkpoint); err != nil {
			return err
		}
		return reply(w, req.Checkpoint)
	})
	s.route("POST", "/v1/log/prove-against", func(w http.ResponseWriter, r *http.Request) error {
		var req proveAgainstRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		p, err := s.e.Log().ProveAgainst(r.Context(), req.ID, &req.Checkpoint)
		if err != nil {
			return err
		}
		return reply(w, p)
	})
	s.route("POST", "/v1/log/consistency-from", func(w http.ResponseWriter, r *http.Request) error {
		var req consistencyFromRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		p, err := s.e.Log().ConsistencyFrom(r.Context(), &req.Checkpoint, req.New)
		if err != nil {
			return err
		}
		return reply(w, p)
	})
	s.route("GET", "/v1/log/prove/{id}", func(w http.ResponseWriter, r *http.Request) error {
		size, err := intParam(r, "checkpoint")
		if err != nil {
			return err
		}
		p, err := s.e.Log().Prove(r.Context(), r.PathValue("id"), uint64(size))
		if err != nil {
			return err
		}
		return reply(w, p)
	})
	s.route("GET", "/v1/log/consistency", func(w http.ResponseWriter, r *http.Request) error {
		o, err := intParam(r, "old")
		if err != nil {
			return err
		}
		n, err := intParam(r, "new")
		if err != nil {
			return err
		}
		p, err := s.e.Log().Consistency(r.Context(), uint64(o), uint64(n))
		if err != nil {
			return err
		}
		return reply(w, p)
	})
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

// uiLogin makes a one-time link to the page for a bearer of the token.
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

func (s *Server) registry(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.e.Registry(r.Context())
	if err != nil {
		return err
	}
	out := registryResponse{Frozen: reg.Frozen, Tau: reg.Tau, Principals: []principalResponse{}, FreezeDigest: reg.FreezeDigest,
		MaxApprovalTTL: reg.MaxApprovalTTL.String(), TrustRoot: reg.TrustRoot}
	if len(reg.OperatorKey) > 0 {
		pemBytes, err := registry.MarshalPublicKey(reg.OperatorKey)
		if err != nil {
			return err
		}
		out.OperatorKey = string(pemBytes)
	}
	for _, p := range reg.Principals {
		pemBytes, err := registry.MarshalPrincipalKey(p.PublicKey)
		if err != nil {
			return err
		}
		out.Principals = append(out.Principals, principalResponse{ID: p.ID, Tier: p.Tier, PublicKey: string(pemBytes), Approver: p.Approver})
	}
	return reply(w, out)
}

func (s *Server) insert(w http.ResponseWriter, r *http.Request) error {
	var req insertRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	start := time.Now()
	n, err := s.e.Insert(r.Context(), req.Envelope, req.Content)
	if err != nil {
		return err
	}
	s.metrics.record.Observe(time.Since(start).Seconds())
	s.metrics.entries.Inc()
	return reply(w, n)
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) error {
	v, err := s.e.Show(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, v)
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) error {
	var req checkRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	start := time.Now()
	d, err := s.e.Envelopes().Check(r.Context(), req.Call, req.ArgSources)
	if err != nil {
		return err
	}
	s.metrics.check.Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues(string(d.Decision)).Inc()
	return reply(w, d)
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

func (s *Server) trace(w http.ResponseWriter, r *http.Request) error {
	depth, err := intParam(r, "max_depth")
	if err != nil {
		return err
	}
	nodes, err := intParam(r, "max_nodes")
	if err != nil {
		return err
	}
	tr, err := s.e.Trace(r.Context(), r.PathValue("id"), lineage.TraceOptions{MaxDepth: depth, MaxNodes: nodes})
	if err != nil {
		return err
	}
	return reply(w, traceResponse{Root: tr.Root, Nodes: nonNil(tr.Nodes), Edges: nonNil(tr.Edges), Untrusted: nonNil(tr.Untrusted), Truncated: tr.Truncated})
}
