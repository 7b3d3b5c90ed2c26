package fleet_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pedigree-ai/pedigree/internal/fleet"
)

// TestNodePermissions: a node whose NATS user has only NodePermissions
// seeds the stream, publishes records, applies them, and loses a
// compare-and-set on a use subject as a node should; with the same user
// the stream cannot be deleted, purged or reconfigured, nor another
// stream created.
func TestNodePermissions(t *testing.T) {
	pass := strings.Repeat("n", 64)
	perms := fleet.NodePermissions("PERM", "perm")
	s, err := fleet.StartServer(fleet.ServerOptions{Name: "perm", Dir: t.TempDir(), User: "node", Password: pass, Permissions: &perms})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := fleet.Connect(ctx, fleet.Config{URL: s.URL(), Replicas: 1, Stream: "PERM", Prefix: "perm", User: "node", Password: pass, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("a node with the recipe's permissions: %v", err)
	}
	defer n.Close()
	if err := n.Seed(ctx, []byte("genesis")); err != nil {
		t.Fatal(err)
	}
	if g, err := n.Genesis(ctx); err != nil || string(g) != "genesis" {
		t.Fatalf("genesis: %q %v", g, err)
	}
	a := &countingApplier{}
	if err := n.Start(a); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Publish(ctx, fleet.Entry, "e1", "e1", []byte("one"), false); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if _, err := n.Publish(ctx, fleet.Use, "x", "u1", []byte("use"), true); err != nil {
		t.Fatalf("a use: %v", err)
	}
	if _, err := n.Publish(ctx, fleet.Use, "x", "u2", []byte("use again"), true); !errors.Is(err, fleet.ErrConflict) {
		t.Fatalf("a second use: %v; want a conflict", err)
	}
	if a.count() != 2 {
		t.Fatalf("applied %d records, want 2", a.count())
	}
	if ok, why := n.Ready(); !ok {
		t.Fatalf("not ready: %s", why)
	}
	// The same user, as a raw client, cannot administer the stream.
	nc, err := nats.Connect(s.URL(), nats.UserInfo("node", pass))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 2*time.Second) }
	c1, x1 := short()
	defer x1()
	if err := js.DeleteStream(c1, "PERM"); err == nil {
		t.Error("the node's user deleted the stream")
	}
	c2, x2 := short()
	defer x2()
	if st, err := js.Stream(c2, "PERM"); err == nil {
		if err := st.Purge(c2); err == nil {
			t.Error("the node's user purged the stream")
		}
	}
	c3, x3 := short()
	defer x3()
	if _, err := js.UpdateStream(c3, jetstream.StreamConfig{Name: "PERM", Subjects: []string{"perm.>"}, Storage: jetstream.FileStorage}); err == nil {
		t.Error("the node's user reconfigured the stream")
	}
	c4, x4 := short()
	defer x4()
	if _, err := js.CreateStream(c4, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err == nil {
		t.Error("the node's user created another stream")
	}
	if ok, why := n.Ready(); !ok {
		t.Fatalf("the stream did not survive: %s", why)
	}
	if _, err := n.Publish(ctx, fleet.Entry, "e2", "e2", []byte("two"), false); err != nil {
		t.Fatalf("publish after: %v", err)
	}
}

// countingApplier applies everything and counts it.
type countingApplier struct {
	mu   sync.Mutex
	seq  uint64
	done int
}

func (c *countingApplier) Applied() (uint64, fleet.Chain, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq, fleet.Chain{}, nil
}

func (c *countingApplier) Apply(_ context.Context, seq uint64, _ fleet.Kind, _ string, _ []byte, _ fleet.Chain) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = seq
	c.done++
	return nil
}

func (c *countingApplier) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}
