package server_test

import (
	"context"
	"strings"
	"testing"
)

// ROBUSTNESS (found by a red team in verb.at, carried from the old client;
// it failed then and passes now). at escaped each value with
// url.PathEscape, which leaves "." and ".." as they are: the request path
// then held a dot segment, the server's mux answered it with a redirect to
// the cleaned path, the client followed it (bearer token and all, same
// host), and another route answered. A dot segment is sent escaped now,
// and the client follows no redirect. Subject(".") was answered by
// GET /v1/decisions/{id} for the decision "subject", Reevaluate(".") by the
// same route for the decision "reevaluate"; Context("..") (a session the
// engine itself answers with an empty context) ends at "/v1", no such
// endpoint: doc.go's "the CLI behaves the same through either" did not
// hold for these values.
func TestRedteamVerbAtDotSegments(t *testing.T) {
	w, c := dialRunning(t)
	ctx := context.Background()
	if _, err := c.Subject(ctx, "."); err != nil && strings.Contains(err.Error(), `"subject"`) {
		t.Errorf(`Subject("."): answered by another route, for the decision "subject": %v`, err)
	}
	if _, err := c.Reevaluate(ctx, "."); err != nil && strings.Contains(err.Error(), "decision reevaluate") {
		t.Errorf(`Reevaluate("."): answered by another route, for the decision "reevaluate": %v`, err)
	}
	want, derr := w.E.Context(ctx, "..")
	got, err := c.Context(ctx, "..")
	if (err == nil) != (derr == nil) || len(got) != len(want) {
		t.Errorf(`Context(".."): through the server %v, %v; the engine itself %v, %v`, got, err, want, derr)
	}
}
