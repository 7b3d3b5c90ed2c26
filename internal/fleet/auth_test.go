package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pedigree-ai/pedigree/internal/fleet"
)

// TestEmbeddedServerRefusesAnonymous: an embedded server given credentials
// takes no client without them: another local user can neither read the
// stream, burn an approval by publishing on its subject, nor delete the
// stream. The node that holds them connects.
func TestEmbeddedServerRefusesAnonymous(t *testing.T) {
	s, err := fleet.StartServer(fleet.ServerOptions{Name: "auth", Dir: t.TempDir(), User: "pedigree", Password: strings.Repeat("p", 64)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("pedigree", "wrong")}} {
		if nc, err := nats.Connect(s.URL(), opts...); err == nil {
			nc.Close()
			t.Fatal("a client without the credentials connected")
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("refused, but not for authorization: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := fleet.Connect(ctx, fleet.Config{URL: s.URL(), Replicas: 1, Stream: "AUTH", User: "pedigree", Password: strings.Repeat("p", 64)})
	if err != nil {
		t.Fatalf("the node with the credentials: %v", err)
	}
	defer n.Close()
}

// TestNotReadyWhenTheStreamIsGone: a node whose stream was deleted says
// it is not ready (it could not log anything).
func TestNotReadyWhenTheStreamIsGone(t *testing.T) {
	s, err := fleet.StartServer(fleet.ServerOptions{Name: "gone", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := fleet.Connect(ctx, fleet.Config{URL: s.URL(), Replicas: 1, Stream: "GONE"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if ok, why := n.Ready(); !ok {
		t.Fatalf("not ready before: %s", why)
	}
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, "GONE"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := n.Ready(); ok {
		t.Fatal("ready with its stream deleted")
	}
}
