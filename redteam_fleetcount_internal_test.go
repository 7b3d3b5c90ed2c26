package pedigree

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/registry"
)

// oneNodeFleet is a fleet of one node (B) on an embedded NATS server,
// checkpointing every 2 records or 200 ms, with its witness at witness,
// and the key of the principal tool:gmail_read.
func oneNodeFleet(t *testing.T, witness string) (*Engine, *registry.Signer) {
	t.Helper()
	ctx := context.Background()
	op, _, _ := registry.GenerateSigner(nil)
	eng, _, _ := registry.GenerateSigner(nil)
	tool, _, _ := registry.GenerateSigner(nil)
	dir := filepath.Join(t.TempDir(), "B")
	e, err := Init(ctx, dir, DefaultTau, WithOperatorSigner(op))
	if err != nil {
		t.Fatal(err)
	}
	for id, k := range map[string]*registry.Signer{"tool:gmail_read": tool, "engine:B": eng} {
		if err := e.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: id, Tier: registry.External, PublicKey: k.Public()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err := fleet.StartServer(fleet.ServerOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	b, err := JoinFleet(ctx, dir, FleetOptions{NATS: srv.URL(), TrustRoot: op.Public().(ed25519.PublicKey), Name: "B", Stream: "RTDUE", Prefix: "rtdue",
		Replicas: 1, Wait: 3 * time.Second, Witness: witness},
		WithoutDurabilityUnsafe(), WithEngineSigner(eng), WithCheckpointEvery(2, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, tool
}

// TestRedTeamFleetCheckpointDueWhileOneRuns: a node's records come due for
// a checkpoint while another of its checkpoints runs (one at a time). The
// count of records published since was reset all the same, so neither
// the next 64 records nor the 5 s ticker checkpointed them: the tail left
// unwitnessed was longer than the 64 records or 5 s the threat model
// promises, for as long as the node wrote nothing more.
func TestRedTeamFleetCheckpointDueWhileOneRuns(t *testing.T) {
	ctx := context.Background()
	const every, interval = 2, 200 * time.Millisecond
	b, tool := oneNodeFleet(t, filepath.Join(t.TempDir(), "witness.json"))
	b.fleet.cpmu.Lock() // a checkpoint runs
	for i := range every {
		if _, err := b.Record(ctx, tool, Entry{Principal: "tool:gmail_read", Session: "s", Content: []byte{byte(i)}}); err != nil {
			b.fleet.cpmu.Unlock()
			t.Fatal(err)
		}
	}
	b.fleet.cpmu.Unlock()
	applied, _ := b.fleet.n.Head()
	deadline := time.Now().Add(10 * interval)
	for time.Now().Before(deadline) {
		if w, _ := b.fleet.witnessed(); w >= applied {
			return
		}
		time.Sleep(interval / 4)
	}
	w, _ := b.fleet.witnessed()
	t.Fatalf("records due for a checkpoint while another ran were never checkpointed: witnessed %d, applied %d after %s", w, applied, 10*interval)
}

// TestRedTeamFleetCheckpointNotWitnessedIsTriedAgain: a node's checkpoint
// is published but its witness file cannot be written (a file stands
// where its directory should be). The records it covers must be checkpointed again by the
// ticker once the witness can be written, not left unwitnessed until the
// node writes again (the count was reset, and the checkpoint published
// again at the same sequence was a duplicate the node never applied, so
// never witnessed).
func TestRedTeamFleetCheckpointNotWitnessedIsTriedAgain(t *testing.T) {
	ctx := context.Background()
	wdir := filepath.Join(t.TempDir(), "w")
	b, tool := oneNodeFleet(t, filepath.Join(wdir, "witness.json"))
	if err := os.WriteFile(wdir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := b.Record(ctx, tool, Entry{Principal: "tool:gmail_read", Session: "s", Content: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(400 * time.Millisecond) // the checkpoint that was due fails
	if err := os.Remove(wdir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wdir, 0o700); err != nil {
		t.Fatal(err)
	}
	applied, _ := b.fleet.n.Head()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if w, _ := b.fleet.witnessed(); w >= applied-1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	w, _ := b.fleet.witnessed()
	t.Fatalf("a checkpoint that could not be witnessed was not tried again: witnessed %d, applied %d", w, applied)
}
