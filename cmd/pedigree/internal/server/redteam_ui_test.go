package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestRedTeamUISessionCookieNotSentToAnotherLocalPort: cookies are not
// isolated by port (RFC 6265 §8.5), and SameSite ignores the port, so the
// pedigree_ui session cookie set for 127.0.0.1:PORT is sent by the person's
// browser to any other server on 127.0.0.1 — for instance one another local
// user runs on a port of their own, reached through a link or a same-site
// client-side navigation. With the cookie alone that user (not a browser:
// Host and Origin are theirs to write) reads the page, takes the CSRF token
// from it and approves with the server's approver key.
func TestRedTeamUISessionCookieNotSentToAnotherLocalPort(t *testing.T) {
	u := newUIWorld(t, true)
	u.login(t)

	// Another local user's server on another loopback port.
	var stolen string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(uiCookie); err == nil {
			stolen = c.Value
		}
	}))
	defer other.Close()
	// The person's browser (the same cookie jar) opens a page there.
	resp, err := u.c.Get(other.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if stolen == "" {
		return // the session did not leak to another port
	}
	t.Errorf("the session cookie was sent to %s, another local port", other.URL)

	// What the thief can then do, outside any browser.
	do := func(method, path string, body url.Values) (int, string) {
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(body.Encode())
		}
		req, _ := http.NewRequest(method, u.srv.URL+path, rd)
		req.AddCookie(&http.Cookie{Name: uiCookie, Value: stolen})
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", u.srv.URL)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	path := "/ui/decision/" + u.denied.ID
	_, page := do("GET", path, nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		return
	}
	do("POST", path+"/approve", url.Values{"csrf": {m[1]}})
	ps, err := u.w.E.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Errorf("with the stolen cookie another local user approved %s as %s", u.denied.ID, u.ui.opts.Approver)
	}
}

// TestRedTeamUIApproveCommandNamesTheDataDirectory: without an approver
// key the page shows 'pedigree gate approve ID --as user:NAME --key ...'
// with no --dir, so the person's shell runs it on ./.pedigree (or
// $PEDIGREE_DIR): not the store the page serves (a 'claude install' setup
// keeps it in ~/.local/share/pedigree), and, in a repository that carries a
// .pedigree of the attacker's, their store, where the person's key signs
// what the attacker put there. The hook's own message names --dir.
func TestRedTeamUIApproveCommandNamesTheDataDirectory(t *testing.T) {
	u := newUIWorld(t, false)
	u.login(t)
	_, page := u.get(t, u.base+"decision/"+u.denied.ID)
	i := strings.Index(page, "gate approve")
	if i < 0 {
		t.Fatalf("no approve command on the page:\n%s", page)
	}
	cmd := page[max(0, i-200):min(len(page), i+300)]
	if !strings.Contains(cmd, "--dir") {
		t.Errorf("the command the page shows names no data directory:\n%s", cmd)
	}
}
