package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/registry"
)

// The page a person reads and decides on: pending decisions, the log, and
// the ancestry of a decision or an entry as a picture. It is served by the
// sidecar on its loopback TCP listener under /ui/, is a client of the same
// verbs as the CLI (pedigree.Backend), and runs no script at all: every
// list and the graph's SVG are rendered on the server, every stored string
// through html/template's escaping and safeText, and the
// Content-Security-Policy forbids scripts, inline styles and any other origin.
//
// Authentication: the CLI (holding the server's bearer token) asks for a
// one-time login URL (POST /v1/ui/login); opening it once sets a session
// cookie (HttpOnly, SameSite=Strict, Path=/ui/) and the link is spent. Every
// action is a POST that must carry the session's CSRF token and come from
// the page's own origin.

// UI paths.
const (
	uiPrefix     = "/ui/"
	uiLoginAPI   = "/v1/ui/login"
	uiCookie     = "pedigree_ui"
	uiLoginTTL   = 2 * time.Minute
	uiSessionTTL = 12 * time.Hour
	// uiCSP forbids every script, inline style, frame and other origin.
	uiCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

//go:embed ui/*.html ui/*.css
var uiFiles embed.FS

// UIOptions configure the page.
type UIOptions struct {
	// Approver signs approvals and rejections made on the page, with
	// ApproverKey. Without them the page shows the command to run instead.
	Approver    string
	ApproverKey *registry.Signer
	// ApprovalTTL is how long an approval made on the page lasts (0: the
	// engine's default).
	ApprovalTTL time.Duration
	// Dir is the data directory, named in the command the page shows when
	// it holds no approver key.
	Dir string
}

type uiSession struct {
	csrf string
	// path is the secret that the session's pages live under
	// (/ui/s/PATH/) and its cookie is scoped to: browsers send a cookie
	// to every port of a host, so a cookie scoped to /ui/ alone reached
	// any other local user's server on 127.0.0.1 (red team).
	path    string
	expires time.Time
}

// base is where the session's pages live.
func (s uiSession) base() string { return uiPrefix + "s/" + s.path + "/" }

// ui serves the page.
type ui struct {
	b      pedigree.Backend
	log    pedigree.Prover // the log's head, shown on the verify page
	opts   UIOptions
	origin string // "http://127.0.0.1:PORT", once the listener is up
	tmpl   *template.Template
	css    []byte
	now    func() time.Time

	mu       sync.Mutex
	logins   map[string]time.Time // one-time login tokens and their expiry
	sessions map[string]uiSession // session cookie values
}

func newUI(b pedigree.Backend, log pedigree.Prover, o UIOptions) (*ui, error) {
	if (o.Approver == "") != (o.ApproverKey == nil) {
		return nil, errors.New("the page's approver needs both a principal and its key")
	}
	t, err := template.New("ui").Funcs(uiFuncs).ParseFS(uiFiles, "ui/*.html")
	if err != nil {
		return nil, err
	}
	css, err := uiFiles.ReadFile("ui/style.css")
	if err != nil {
		return nil, err
	}
	return &ui{b: b, log: log, opts: o, tmpl: t, css: css, now: time.Now,
		logins: map[string]time.Time{}, sessions: map[string]uiSession{}}, nil
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// LoginURL makes a one-time login link.
func (u *ui) LoginURL(path string) (string, error) {
	if u.origin == "" {
		return "", errors.New("the page is served on the TCP listener: start the server with --ui (and --addr)")
	}
	t := randomToken()
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	for k, exp := range u.logins {
		if now.After(exp) {
			delete(u.logins, k)
		}
	}
	if len(u.logins) >= 64 {
		return "", errors.New("too many unused login links: open one of them, or wait two minutes")
	}
	u.logins[t] = now.Add(uiLoginTTL)
	q := url.Values{"t": {t}}
	if path != "" {
		q.Set("next", path)
	}
	return u.origin + uiPrefix + "login?" + q.Encode(), nil
}

// spendLogin consumes a one-time token.
func (u *ui) spendLogin(t string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, exp := range u.logins {
		if subtle.ConstantTimeCompare([]byte(k), []byte(t)) == 1 {
			delete(u.logins, k)
			return u.now().Before(exp)
		}
	}
	return false
}

func (u *ui) session(r *http.Request) (uiSession, bool) {
	c, err := r.Cookie(uiCookie)
	if err != nil || len(c.Value) != 64 {
		return uiSession{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, s := range u.sessions {
		if subtle.ConstantTimeCompare([]byte(k), []byte(c.Value)) == 1 {
			if u.now().After(s.expires) {
				delete(u.sessions, k)
				return uiSession{}, false
			}
			return s, true
		}
	}
	return uiSession{}, false
}

// ServeHTTP checks who is asking, then serves a view or an action.
func (u *ui) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes a browser send Origin: null on a form post
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// DNS rebinding: a page on another name that resolves to loopback
	// sends its own Host.
	if u.origin == "" || r.Host != strings.TrimPrefix(u.origin, "http://") {
		http.Error(w, "this page is served only as "+u.origin, http.StatusForbidden)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, uiPrefix)
	if path == "login" {
		u.login(w, r)
		return
	}
	if path == "style.css" {
		h.Set("Content-Type", "text/css; charset=utf-8")
		w.Write(u.css)
		return
	}
	sess, ok := u.session(r)
	if ok {
		rest, found := strings.CutPrefix(r.URL.Path, sess.base())
		if !found {
			ok = false
		}
		path = rest
	}
	if !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		u.render(w, "login.html", nil)
		return
	}
	if r.Method == http.MethodPost {
		if err := u.checkPost(r, sess); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
		return
	}
	var err error
	switch {
	case path == "" && r.Method != http.MethodPost:
		err = u.pending(w, r, sess)
	case path == "log" && r.Method != http.MethodPost:
		err = u.logView(w, r, sess)
	case path == "verify":
		err = u.verifyView(w, r, sess)
	case strings.HasPrefix(path, "decision/"):
		err = u.decision(w, r, sess, strings.TrimPrefix(path, "decision/"))
	case strings.HasPrefix(path, "entry/") && r.Method != http.MethodPost:
		err = u.entry(w, r, sess, strings.TrimPrefix(path, "entry/"))
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		status := http.StatusInternalServerError
		if _, s := classify(err); s != http.StatusInternalServerError {
			status = s
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		if t, terr := u.forSession(sess); terr == nil {
			t.ExecuteTemplate(w, "error.html", map[string]any{"Error": err.Error(), "CSRF": sess.csrf})
		}
	}
}

func (u *ui) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	if !u.spendLogin(r.URL.Query().Get("t")) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		u.render(w, "login.html", map[string]any{"Spent": true})
		return
	}
	v := randomToken()
	u.mu.Lock()
	now := u.now()
	for k, s := range u.sessions {
		if now.After(s.expires) {
			delete(u.sessions, k)
		}
	}
	sess := uiSession{csrf: randomToken(), path: randomToken()[:32], expires: now.Add(uiSessionTTL)}
	u.sessions[v] = sess
	u.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: v, Path: sess.base(), HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(uiSessionTTL / time.Second)})
	next := sess.base()
	if n := r.URL.Query().Get("next"); strings.HasPrefix(n, uiPrefix) && !strings.ContainsAny(n, "\\\r\n") && !strings.Contains(n, "//") && !strings.Contains(n, "..") {
		next += strings.TrimPrefix(n, uiPrefix)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// checkPost admits an action: from the page's own origin, as a form, with
// the session's CSRF token.
func (u *ui) checkPost(r *http.Request, sess uiSession) error {
	if o := r.Header.Get("Origin"); o != u.origin {
		return fmt.Errorf("an action must come from %s, not from %q", u.origin, o)
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return fmt.Errorf("an action must come from this page (Sec-Fetch-Site %q)", s)
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return errors.New("an action is a form")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.csrf)) != 1 {
		return errors.New("the form's CSRF token is missing or stale: reload the page")
	}
	return nil
}

// render draws a page outside any session (the login page). It executes a
// clone: html/template refuses to clone a template once it has run, and
// every session's pages are clones of u.tmpl (forSession).
func (u *ui) render(w io.Writer, name string, data any) {
	t, err := u.tmpl.Clone()
	if err == nil {
		err = t.ExecuteTemplate(w, name, data)
	}
	if err != nil {
		fmt.Fprintf(w, "<p>the page could not be drawn: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

func (u *ui) page(w http.ResponseWriter, name string, data map[string]any, sess uiSession) error {
	data["CSRF"] = sess.csrf
	data["CanSign"] = u.opts.ApproverKey != nil
	data["Approver"] = u.opts.Approver
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	t, err := u.forSession(sess)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if err := t.ExecuteTemplate(&sb, name, data); err != nil {
		return err
	}
	_, err = io.WriteString(w, sb.String())
	return err
}

// pendingGroup is one session's decisions awaiting a person.
type pendingGroup struct {
	Session string
	Items   []pendingItem
}

type pendingItem struct {
	gate.Pending
	Args   []argView
	Age    string
	Decide decideView
}

// decideView is what the Approve once and Reject buttons need, or the
// command to run instead.
type decideView struct {
	ID, CSRF, Approver, Command string
	CanSign                     bool
}

func (u *ui) decideView(id string, sess uiSession) decideView {
	return decideView{ID: id, CSRF: sess.csrf, Approver: u.opts.Approver, Command: approveCommand(u.opts.Dir, id), CanSign: u.opts.ApproverKey != nil}
}

func (u *ui) pending(w http.ResponseWriter, r *http.Request, sess uiSession) error {
	ps, err := u.b.Pending(r.Context())
	if err != nil {
		return err
	}
	var groups []*pendingGroup
	bySession := map[string]*pendingGroup{}
	for _, p := range ps { // newest first, as Pending lists them
		g := bySession[p.Session]
		if g == nil {
			g = &pendingGroup{Session: p.Session}
			bySession[p.Session] = g
			groups = append(groups, g)
		}
		g.Items = append(g.Items, pendingItem{Pending: p, Args: argViews(p.Args, p.Arguments), Age: u.age(p.Time), Decide: u.decideView(p.DecisionID, sess)})
	}
	return u.page(w, "pending.html", map[string]any{"Groups": groups, "Count": len(ps), "Flash": r.URL.Query().Get("done")}, sess)
}

func (u *ui) age(t string) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return ""
	}
	return u.now().Sub(at).Round(time.Second).String() + " ago"
}

// decision shows one decision, its action, the ancestry of its call, and
// (for a pending one) the buttons; POST approve and reject act on it.
func (u *ui) decision(w http.ResponseWriter, r *http.Request, sess uiSession, rest string) error {
	id, action, _ := strings.Cut(rest, "/")
	ctx := r.Context()
	if r.Method == http.MethodPost {
		return u.act(w, r, sess, id, action)
	}
	if action != "" {
		return badRequest{errors.New("unknown view " + action)}
	}
	d, err := u.b.Decision(ctx, id)
	if err != nil {
		return err
	}
	var pend *gate.Pending
	if ps, err := u.b.Pending(ctx); err == nil {
		for i := range ps {
			if ps[i].DecisionID == d.ID {
				pend = &ps[i]
			}
		}
	}
	data := map[string]any{"D": d, "Pending": pend, "Age": u.age(d.Time)}
	if pend != nil {
		data["Args"] = argViews(pend.Args, pend.Arguments)
	}
	g, err := u.graph(ctx, d.CallID, r.URL.Query())
	if err != nil {
		return err
	}
	data["Graph"] = g
	data["Decide"] = u.decideView(d.ID, sess)
	return u.page(w, "decision.html", data, sess)
}

// approveCommand is what to type when the page holds no approver key: on
// the data directory the page serves (red team: without --dir the shell's
// ./.pedigree or $PEDIGREE_DIR was another store).
func approveCommand(dir, id string) string {
	return "pedigree --dir " + shellQuote(dir) + " gate approve " + id + " --as user:NAME --key \"$PEDIGREE_KEYS/NAME.key\""
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// forSession is the templates with the ui function giving the session's
// own paths.
func (u *ui) forSession(sess uiSession) (*template.Template, error) {
	t, err := u.tmpl.Clone()
	if err != nil {
		return nil, err
	}
	base := sess.base()
	return t.Funcs(template.FuncMap{"ui": func(p string) string { return base + p }}), nil
}

func (u *ui) act(w http.ResponseWriter, r *http.Request, sess uiSession, id, action string) error {
	if u.opts.ApproverKey == nil {
		return badRequest{errors.New("this server holds no approver key: run the command the page shows")}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	d, err := u.b.Decision(ctx, id)
	if err != nil {
		return err
	}
	switch action {
	case "approve":
		_, err = u.b.Approve(ctx, u.opts.ApproverKey, u.opts.Approver, d.ID, u.opts.ApprovalTTL)
	case "reject":
		_, err = u.b.Reject(ctx, u.opts.ApproverKey, u.opts.Approver, d.ID)
	default:
		return badRequest{errors.New("unknown action " + action)}
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, sess.base()+"?done="+url.QueryEscape(action+"d "+short(d.ID)), http.StatusSeeOther)
	return nil
}

func (u *ui) entry(w http.ResponseWriter, r *http.Request, sess uiSession, id string) error {
	v, err := u.b.Show(r.Context(), id)
	if err != nil {
		return err
	}
	g, err := u.graph(r.Context(), v.Node.ID, r.URL.Query())
	if err != nil {
		return err
	}
	return u.page(w, "entry.html", map[string]any{"V": v, "Graph": g,
		"Content": safeText(string(v.Content)), "Envelope": safeText(string(v.Envelope))}, sess)
}

// logFilter is the log view's query.
type logFilter struct {
	Session, Tool, Outcome, Principal, Since string
}

func (u *ui) logView(w http.ResponseWriter, r *http.Request, sess uiSession) error {
	q := r.URL.Query()
	f := logFilter{Session: q.Get("session"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Principal: q.Get("principal"), Since: q.Get("since")}
	var since time.Time
	if f.Since != "" {
		d, err := time.ParseDuration(f.Since)
		if err != nil {
			return badRequest{fmt.Errorf("since: a duration such as 1h, not %q", f.Since)}
		}
		since = u.now().Add(-d)
	}
	ds, err := u.b.Decisions(r.Context(), pedigree.DecisionQuery{Session: f.Session})
	if err != nil {
		return err
	}
	var out []gate.Decision
	for i := len(ds) - 1; i >= 0 && len(out) < 500; i-- { // newest first
		d := ds[i]
		if (f.Tool != "" && d.Tool != f.Tool) || (f.Outcome != "" && string(d.Decision) != f.Outcome) || (f.Principal != "" && d.Principal != f.Principal) {
			continue
		}
		if !since.IsZero() {
			if at, err := time.Parse(time.RFC3339Nano, d.Time); err != nil || at.Before(since) {
				continue
			}
		}
		out = append(out, d)
	}
	data := map[string]any{"Decisions": out, "F": f, "Total": len(ds)}
	// A session's trajectory alerts: the soft evidence beside its decisions
	// (the default policy never asks or denies on an alert alone).
	if f.Session != "" {
		st, err := u.b.Trajectory(r.Context(), f.Session)
		if err != nil {
			return err
		}
		data["Alerts"] = st.Alerts
	}
	// Writes the engine refused (a bad signature, an unknown principal, an
	// approval that did not hold), newest first: what someone tried that
	// never reached the record.
	refused, err := u.b.Refusals(r.Context(), uiRefusals)
	if err != nil {
		return err
	}
	slices.Reverse(refused)
	data["Refusals"] = refused
	return u.page(w, "log.html", data, sess)
}

// uiRefusals is how many of the latest refused writes the log view lists.
const uiRefusals = 50

func (u *ui) verifyView(w http.ResponseWriter, r *http.Request, sess uiSession) error {
	data := map[string]any{}
	if r.Method == http.MethodPost {
		rep, err := u.b.Verify(r.Context())
		if err != nil {
			return err
		}
		data["Report"] = rep
	}
	n, root, err := u.log.Head(r.Context())
	if err != nil {
		return err
	}
	data["LogSize"], data["LogRoot"] = n, root
	return u.page(w, "verify.html", data, sess)
}

// argView is one argument as a person must see it: whole, with its sources.
type argView struct {
	Name      string
	Value     string
	Sources   []gate.SourceRef
	Explicit  bool
	Untrusted bool
}

// argViews lists the call's arguments, those with an untrusted source
// first, each value whole (escaped, never clipped).
func argViews(raw []byte, prov map[string]gate.ArgProvenance) []argView {
	vals := map[string]string{}
	if obj, err := decodeObject(raw); err == nil {
		vals = obj
	} else if len(raw) > 0 {
		vals[""] = string(raw)
	}
	var out []argView
	for name, v := range vals {
		a := argView{Name: name, Value: safeText(v)}
		if p, ok := prov[name]; ok {
			a.Sources, a.Explicit = p.Sources, p.Explicit
			for _, s := range p.Sources {
				if s.EffectiveTier != registry.Internal.String() && s.EffectiveTier != registry.User.String() {
					a.Untrusted = true
				}
			}
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y argView) int {
		if x.Untrusted != y.Untrusted {
			if x.Untrusted {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
