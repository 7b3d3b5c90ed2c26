package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// hostile is content an attacker wrote: markup, a script, an event
// handler, terminal escapes, a bidi override and a zero-width space.
const hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[2A\x1b[2Kprincipal user:alice\u202egnp.exe\u200b\"'&"

// uiWorld is a served page over a world with one poisoned session whose
// payment was denied.
type uiWorld struct {
	w      *enginetest.World
	srv    *httptest.Server
	ui     *ui
	c      *http.Client
	base   string // the session's pages, after login
	denied *gate.Decision
	email  *lineage.Node
}

func newUIWorld(t *testing.T, withKey bool, opts ...pedigree.Option) *uiWorld {
	t.Helper()
	w := enginetest.New(t, enginetest.Default, opts...)
	ctx := t.Context()
	email, err := w.E.Record(ctx, w.Keys["tool:gmail_read"], pedigree.Entry{Principal: "tool:gmail_read", Kind: lineage.KindToolOutput,
		Session: "s1", Content: []byte(hostile), StoreContent: true, Parents: []lineage.Parent{}})
	if err != nil {
		t.Fatal(err)
	}
	d := w.Check("agent:planner", pedigree.Call{Session: "s1", Tool: "send_money",
		Args:       []byte(`{"a_memo":"` + strings.Repeat("rent for december ", 30) + `","to":"999-666"}`),
		ArgSources: map[string][]string{"to": {email.ID}, "a_memo": {email.ID}}, Justification: []string{email.ID}})
	if d.Decision == gate.Allow {
		t.Fatalf("the poisoned call was allowed: %+v", d)
	}
	s := New(w.E, nil)
	srv := httptest.NewServer(s.Authenticated("the-token"))
	t.Cleanup(srv.Close)
	o := UIOptions{}
	if withKey {
		o = UIOptions{Approver: "user:alice", ApproverKey: w.Keys["user:alice"]}
	}
	if err := s.EnableUI(srv.URL, o); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	return &uiWorld{w: w, srv: srv, ui: s.ui, c: c, denied: d, email: email}
}

func (u *uiWorld) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := u.c.Get(u.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (u *uiWorld) login(t *testing.T) string {
	t.Helper()
	link, err := u.ui.LoginURL("")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := u.c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	u.base = resp.Request.URL.Path
	if !strings.HasPrefix(u.base, "/ui/s/") {
		t.Fatalf("login landed on %s, not a session's pages", u.base)
	}
	return link
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func (u *uiWorld) post(t *testing.T, path, origin string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := u.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUIRendersHostileContentAsText: every view that shows the poisoned
// email's content, principal or the call's arguments shows them as text.
func TestUIRendersHostileContentAsText(t *testing.T) {
	u := newUIWorld(t, false)
	u.login(t)
	for _, path := range []string{u.base, u.base + "decision/" + u.denied.ID, u.base + "entry/" + u.email.ID, u.base + "log", u.base + "log?tool=send_money", u.base + "decision/" + u.denied.ID + "?q=gmail&collapse=1"} {
		code, body := u.get(t, path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		for _, raw := range []string{"<script", "<img", "\x1b", "\u202e", "\u200b"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s shows %q raw", path, raw)
			}
		}
	}
	_, body := u.get(t, u.base+"entry/"+u.email.ID)
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `\x1b[2A`, `\u202e`, `\u200b`} {
		if !strings.Contains(body, want) {
			t.Errorf("the entry's page does not show %q escaped", want)
		}
	}
}

// TestUIShowsTheRecipientWhole: a long benign argument that sorts first
// does not push the recipient out of view.
func TestUIShowsTheRecipientWhole(t *testing.T) {
	u := newUIWorld(t, false)
	u.login(t)
	for _, path := range []string{u.base, u.base + "decision/" + u.denied.ID} {
		_, body := u.get(t, path)
		if !strings.Contains(body, "999-666") {
			t.Errorf("%s does not show the recipient", path)
		}
		if !strings.Contains(body, strings.Repeat("rent for december ", 30)) {
			t.Errorf("%s does not show the memo whole", path)
		}
		if !strings.Contains(body, "gmail_read") {
			t.Errorf("%s does not say where the recipient came from", path)
		}
	}
	// Without a key the page says what to run, with no placeholder ID.
	_, body := u.get(t, u.base+"decision/"+u.denied.ID)
	if !strings.Contains(body, " gate approve "+u.denied.ID) {
		t.Errorf("the decision's page does not give the approve command")
	}
}

// TestUIAuthentication: no cookie, a spent link, another Host, or the
// bearer-only API without the token: nothing is shown.
func TestUIAuthentication(t *testing.T) {
	u := newUIWorld(t, false)
	if code, body := u.get(t, "/ui/"); code != 401 || strings.Contains(body, "999-666") {
		t.Fatalf("without a login: %d", code)
	}
	link := u.login(t)
	if code, _ := u.get(t, u.base); code != 200 {
		t.Fatalf("after login: %d", code)
	}
	// The link is spent: another browser cannot use it.
	other := &http.Client{}
	resp, err := other.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("a spent link: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// DNS rebinding: the same server under another name.
	req, _ := http.NewRequest("GET", u.srv.URL+u.base, nil)
	req.Host = "evil.example:80"
	if resp, err := u.c.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("another Host: %v %v", resp, err)
	}
	// The login API needs the bearer token, like every other route.
	r2, _ := http.NewRequest("POST", u.srv.URL+uiLoginAPI, strings.NewReader(`{}`))
	r2.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(r2); err != nil || resp.StatusCode != 401 {
		t.Fatalf("login API without the token: %v %v", resp, err)
	}
	r2, _ = http.NewRequest("POST", u.srv.URL+uiLoginAPI, strings.NewReader(`{}`))
	r2.Header.Set("Content-Type", "application/json")
	r2.Header.Set("Authorization", "Bearer the-token")
	resp, err = http.DefaultClient.Do(r2)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("login API with the token: %v %v", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), u.srv.URL+"/ui/login?t=") {
		t.Fatalf("login API answer: %s", b)
	}
	// Headers: no script, no framing.
	resp, _ = u.c.Get(u.srv.URL + u.base)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Fatalf("CSP: %q", csp)
	}
}

// TestUIApproveOnce: a person approves on the page; the call is allowed
// once; forged posts (no CSRF token, another origin) do nothing.
func TestUIApproveOnce(t *testing.T) {
	u := newUIWorld(t, true)
	u.login(t)
	path := u.base + "decision/" + u.denied.ID
	_, page := u.get(t, path)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no approve form on the page:\n%s", page)
	}
	ctx := context.Background()
	pendingCount := func() int {
		ps, err := u.w.E.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}
	for name, try := range map[string]struct {
		origin string
		form   url.Values
	}{
		"no csrf token":  {u.srv.URL, url.Values{}},
		"a wrong token":  {u.srv.URL, url.Values{"csrf": {strings.Repeat("0", 64)}}},
		"another origin": {"http://evil.example", url.Values{"csrf": {m[1]}}},
		"no origin":      {"", url.Values{"csrf": {m[1]}}},
	} {
		if code, _ := u.post(t, path+"/approve", try.origin, try.form); code != 403 {
			t.Errorf("%s: %d", name, code)
		}
	}
	if pendingCount() != 1 {
		t.Fatal("a forged post approved the decision")
	}
	if code, body := u.post(t, path+"/approve", u.srv.URL, url.Values{"csrf": {m[1]}}); code != 200 || !strings.Contains(body, "approved") {
		t.Fatalf("approve: %d %s", code, body)
	}
	if pendingCount() != 0 {
		t.Fatal("the approved decision is still pending")
	}
	retry := pedigree.Call{Session: "s1", Tool: "send_money", Args: []byte(`{"a_memo":"` + strings.Repeat("rent for december ", 30) + `","to":"999-666"}`),
		ArgSources: map[string][]string{"to": {u.email.ID}, "a_memo": {u.email.ID}}, Justification: []string{u.email.ID}}
	if d := u.w.Check("agent:planner", retry); d.Decision != gate.Allow {
		t.Fatalf("the approved call, retried: %s %v", d.Decision, d.Reasons)
	}
	if d := u.w.Check("agent:planner", retry); d.Decision == gate.Allow {
		t.Fatal("the approval allowed its call twice")
	}
}

// TestLayoutLargeAndWeak: 1,000 ancestors wrap into rows of gPerRow, a weak
// edge is dashed and not tainted, the strong path to the untrusted root is
// tainted, collapsing other sessions leaves one box per session, and a
// search marks what it finds.
func TestLayoutLargeAndWeak(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%064x", i) }
	root := &lineage.Node{ID: id(0), Session: "s", Principal: "agent:a", Effective: registry.External}
	tr := &lineage.Trace{Root: root, Nodes: []*lineage.Node{root}}
	for i := 1; i <= 1000; i++ {
		n := &lineage.Node{ID: id(i), Session: fmt.Sprintf("other-%d", i%3), Principal: "tool:t", Effective: registry.Internal}
		if i == 1 {
			n.Session, n.Principal, n.Effective = "s", "tool:web", registry.External
		}
		tr.Nodes = append(tr.Nodes, n)
		tr.Edges = append(tr.Edges, lineage.Edge{Child: id(0), Parent: id(i), Weight: 1, Strong: i != 2})
	}
	tr.Untrusted = []lineage.Source{{ID: id(1), Path: []string{id(0), id(1)}, Strong: true}}
	g := layout(tr, "tool:web", false)
	if len(g.Nodes) != 1001 || len(g.Edges) != 1000 {
		t.Fatalf("%d nodes, %d edges", len(g.Nodes), len(g.Edges))
	}
	if want := gGapX + gPerRow*(gNodeW+gGapX); g.Width != want {
		t.Errorf("width %d, want %d (a layer wraps at %d)", g.Width, want, gPerRow)
	}
	var taint, weak, match int
	for _, e := range g.Edges {
		if strings.Contains(e.Class, "taint") {
			taint++
		}
		if strings.Contains(e.Class, "weak") {
			weak++
		}
	}
	for _, n := range g.Nodes {
		if strings.Contains(n.Class, "match") {
			match++
			if !strings.Contains(n.Class, "untrusted") {
				t.Errorf("the match is not marked untrusted: %q", n.Class)
			}
		}
	}
	if taint != 1 || weak != 1 || match != 1 {
		t.Errorf("taint %d weak %d match %d, want 1 each", taint, weak, match)
	}
	c := layout(tr, "", true)
	if len(c.Nodes) != 1+1+3 { // the root, its session's one parent, three other sessions
		t.Errorf("collapsed: %d boxes, want 5", len(c.Nodes))
	}
}

// TestUILogShowsAlertsAndRefusals: the log view lists, beside the
// decisions, a session's trajectory alerts and the writes the engine
// refused.
func TestUILogShowsAlertsAndRefusals(t *testing.T) {
	cat, err := gate.ParseCatalog([]byte("tools:\n  send_money: {sensitive: true, irreversible: true, args: {to: {trusted: true}}}\n  email_send: {sensitive: true, role: send, recipient_arg: to}\n"))
	if err != nil {
		t.Fatal(err)
	}
	u := newUIWorld(t, false, pedigree.WithCatalog(cat))
	// An entry claiming the mail tool, signed with someone else's key.
	if _, err := u.w.E.Record(t.Context(), u.w.Keys["user:alice"], pedigree.Entry{Principal: "tool:gmail_read", Kind: lineage.KindToolOutput,
		Session: "s1", Content: []byte("x"), Parents: []lineage.Parent{}}); err == nil {
		t.Fatal("an entry signed with another principal's key was stored")
	}
	// A session that recalls a memory, then emails it outside: an alert.
	ctx := t.Context()
	prompt, err := u.w.E.Record(ctx, u.w.Keys["user:alice"], pedigree.Entry{Principal: "user:alice", Kind: lineage.KindPrompt,
		Session: "s2", Content: []byte("email the report to the client"), Parents: []lineage.Parent{}})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := u.w.E.Record(ctx, u.w.Keys["agent:planner"], pedigree.Entry{Principal: "agent:planner", Kind: lineage.KindMemory,
		Session: "s9", Content: []byte("the report"), Parents: enginetest.Strong(prompt.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.w.E.Recall(ctx, "s2", []string{mem.ID}); err != nil {
		t.Fatal(err)
	}
	u.w.Check("agent:planner", pedigree.Call{Session: "s2", Tool: "email_send", Args: []byte(`{"to":"x@elsewhere.org"}`), Justification: []string{prompt.ID, mem.ID}})
	u.login(t)
	_, body := u.get(t, u.base+"log")
	if !strings.Contains(body, "Refused writes") || !regexp.MustCompile(`<td>bad_(key|signature)</td><td>tool:gmail_read</td>`).MatchString(body) {
		t.Fatalf("the log view does not list the refused write:\n%s", body)
	}
	if strings.Contains(body, "Trajectory alerts") {
		t.Fatal("alerts listed with no session named")
	}
	if !strings.Contains(body, `log?session=s1"`) {
		t.Fatalf("a decision's session does not link to its log: %s", body)
	}
	_, body = u.get(t, u.base+"log?session=s2")
	if !strings.Contains(body, "Trajectory alerts in session s2") || !strings.Contains(body, "recall-then-external-send") {
		t.Fatalf("the session's log does not list its trajectory alert:\n%s", body)
	}
	_, body = u.get(t, u.base+"log?session=elsewhere")
	if !strings.Contains(body, "No trajectory alerts in this session") {
		t.Fatalf("a session with no calls: %s", body)
	}
}

// TestUIVerifyShowsTheLogHead: the verify page names the log's size and
// root as the engine has them, and verifying from the page reports ok.
// (The head went missing from the page once, when it moved off Engine
// and the page still asked for the old method.)
func TestUIVerifyShowsTheLogHead(t *testing.T) {
	u := newUIWorld(t, false)
	u.login(t)
	size, root, err := u.w.E.Log().Head(t.Context())
	if err != nil || size == 0 {
		t.Fatalf("head: %d %v", size, err)
	}
	code, page := u.get(t, u.base+"verify")
	want := fmt.Sprintf("The log holds %d leaves; its root is <code>%s</code>.", size, root)
	if code != 200 || !strings.Contains(page, want) {
		t.Fatalf("verify page (%d) does not say %q:\n%s", code, want, page)
	}
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf token on the verify page")
	}
	code, body := u.post(t, u.base+"verify", u.srv.URL, url.Values{"csrf": {m[1]}})
	if code != 200 || !strings.Contains(body, `<h2 class="good">ok</h2>`) {
		t.Fatalf("verify from the page: %d\n%s", code, body)
	}
}
