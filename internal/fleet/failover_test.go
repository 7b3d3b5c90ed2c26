package fleet_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
)

// leader is the index of the server that leads the stream now.
func leader(t *testing.T) int {
	t.Helper()
	for i, s := range fx.servers {
		if s != nil && s.StreamLeader("PEDIGREE") {
			return i
		}
	}
	t.Fatal("no server leads the stream")
	return -1
}

// The stream's leader is killed while every node writes chains of entries:
// every acknowledged entry is on every node, once, after its parent, and
// every node verifies clean with the same log head.
func TestKillLeaderDuringConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	type acked struct{ id, parent string }
	var mu sync.Mutex
	var got []acked
	var failures int
	session := uniq("kill")
	started := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, node := range []string{"A", "B", "C"} {
		for g := range 2 {
			wg.Go(func() {
				parent, misses := "", 0
				for i := 0; i < 40 && misses < 2; i++ {
					var ps []lineage.Parent
					if parent != "" {
						ps = []lineage.Parent{{ID: parent, Weight: 1}}
					}
					n, err := fx.nodes[node].Record(ctx, fx.keys["agent:assistant"], pedigree.Entry{Principal: "agent:assistant",
						Session: fmt.Sprintf("%s-%s%d", session, node, g), Content: []byte(fmt.Sprint(node, g, i)), Parents: ps})
					if err != nil {
						misses++
						mu.Lock()
						failures++
						mu.Unlock()
						continue
					}
					misses = 0
					mu.Lock()
					got = append(got, acked{n.ID, parent})
					mu.Unlock()
					parent = n.ID
					select {
					case started <- struct{}{}:
					default:
					}
				}
			})
		}
	}
	for range 20 {
		<-started
	}
	killed := leader(t)
	fx.servers[killed].Shutdown()
	fx.servers[killed] = nil
	t.Cleanup(func() { fx.restart(t, killed) })
	wg.Wait()
	fx.restart(t, killed)
	t.Logf("%d entries acknowledged, %d writes failed, leader s%d killed", len(got), failures, killed+1)
	fx.settle(t)
	for _, name := range []string{"A", "B", "C"} {
		e := fx.nodes[name]
		for _, a := range got {
			v, err := e.Show(ctx, a.id)
			if err != nil {
				t.Fatalf("node %s lost acknowledged entry %s: %v", name, a.id[:12], err)
			}
			if a.parent != "" {
				p, err := e.Show(ctx, a.parent)
				if err != nil || p.Node.Seq >= v.Node.Seq {
					t.Fatalf("node %s: parent %s (seq %d) not before child %s (seq %d): %v", name, a.parent[:12], p.Node.Seq, a.id[:12], v.Node.Seq, err)
				}
			}
		}
	}
}

// A node stopped while the others write catches up when it starts again:
// its verify is clean and its log head is the others'.
func TestRestartedNodeCatchesUp(t *testing.T) {
	ctx := context.Background()
	if err := fx.nodes["C"].Close(); err != nil {
		t.Fatal(err)
	}
	delete(fx.nodes, "C")
	parent := ""
	for i := range 50 {
		var ps []string
		if parent != "" {
			ps = []string{parent}
		}
		parent = fx.record(t, "A", "agent:assistant", uniq("while-c-was-down"), fmt.Sprint(i), ps...).ID
	}
	if err := fx.join(ctx, "C"); err != nil {
		t.Fatal(err)
	}
	fx.settle(t)
	if _, err := fx.nodes["C"].Show(ctx, parent); err != nil {
		t.Fatalf("C did not catch up: %v", err)
	}
	if s, _ := fx.nodes["C"].Fleet().Status(); s.Applies < 50 || s.Lag != 0 {
		t.Fatalf("C's status after catching up: %+v", s)
	}
}

// A node cut off from the cluster denies a check on an entry it has not
// seen, cannot spend an approval, and says it is not ready; the approval
// stays single-use across the fleet.
func TestCutOffNodeFailsClosed(t *testing.T) {
	ctx := context.Background()
	session := uniq("cut")
	mail := deniedAndApproved(t, session)
	args := `{"to":"999-666","amount":100}`
	if err := fx.nodes["C"].Fleet().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	fx.servers[2].Shutdown() // C knows only server 3
	fx.servers[2] = nil
	t.Cleanup(func() { fx.restart(t, 2) })
	fx.waitLeader(t, 0)
	// A write while the cluster elects a leader may fail (it is not
	// acknowledged); A goes on writing once there is one.
	var fresh *lineage.Node
	for deadline := time.Now().Add(30 * time.Second); fresh == nil; {
		n, err := fx.nodes["A"].Record(ctx, fx.keys["agent:assistant"], pedigree.Entry{Principal: "agent:assistant", Session: session, Content: []byte("written while C is cut off")})
		if err != nil && time.Now().After(deadline) {
			t.Fatal(err)
		}
		if err != nil {
			t.Logf("A, while server 3 is down: %v", err)
		}
		fresh = n
	}

	allows := 0
	if d, err := fx.check("C", session, []string{fresh.ID}, `{"to":"x"}`); err == nil && d.Decision != gate.Deny {
		t.Errorf("cut off, C decided %s on an entry it has not seen", d.Decision)
	}
	if d, err := fx.check("C", session, []string{mail}, args); err == nil && d.Decision == gate.Allow {
		allows++
	}
	// After two failed writes C knows it is cut off.
	if s, _ := fx.nodes["C"].Fleet().Status(); s.Ready {
		t.Errorf("C is cut off but says it is ready: %+v", s)
	}
	if s, _ := fx.nodes["C"].Fleet().Status(); !strings.Contains(s.Why, "not connected") {
		t.Errorf("C is cut off; its status (the sidecar's /readyz): %+v", s)
	}
	if d, err := fx.check("A", session, []string{mail}, args); err != nil {
		t.Fatal(err)
	} else if d.Decision == gate.Allow {
		allows++
	}
	fx.restart(t, 2)
	if err := fx.nodes["C"].Fleet().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := fx.check("C", session, []string{mail}, args); err != nil {
		t.Fatal(err)
	} else if d.Decision == gate.Allow {
		allows++
	}
	if allows != 1 {
		t.Fatalf("%d allows for one approval across the fleet; want 1", allows)
	}
	fx.settle(t)
}

// A node's directory is a materialised view: deleted, it is made again
// from the stream, with the same log head as the others.
func TestDirectoryRebuiltFromStream(t *testing.T) {
	ctx := context.Background()
	fx.record(t, "A", "agent:assistant", uniq("rebuild"), "before C's directory is deleted")
	if err := fx.nodes["C"].Close(); err != nil {
		t.Fatal(err)
	}
	delete(fx.nodes, "C")
	if err := os.RemoveAll(fx.dirs["C"]); err != nil {
		t.Fatal(err)
	}
	if err := fx.join(ctx, "C"); err != nil {
		t.Fatal(err)
	}
	fx.settle(t)
}
