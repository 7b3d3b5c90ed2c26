package pedigree_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// TestConcurrentUse records, checks, traces, recalls, checkpoints and
// verifies from many goroutines at once (run it with -race). The world's
// cleanup verifies the store afterwards.
func TestConcurrentUse(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	ctx := t.Context()
	seed := w.Record("tool:gmail_read", "s0", "seed", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 6 {
		wg.Go(func() {
			session := fmt.Sprintf("s%d", g%3) // sessions shared between goroutines
			last := seed.ID
			for i := range 25 {
				who := []string{"user:alice", "agent:planner", "tool:gmail_read"}[(g+i)%3]
				n, err := w.E.Record(ctx, w.Keys[who], pedigree.Entry{Principal: who, Session: session, Content: []byte(fmt.Sprint(g, i)), Parents: []lineage.Parent{{ID: last, Weight: 1}}})
				if err != nil {
					errs <- err
					return
				}
				last = n.ID
				switch i % 5 {
				case 0:
					d, err := w.E.Check(ctx, w.Keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: session, Tool: "pay", Args: []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)), Justification: []string{n.ID}})
					if err != nil {
						errs <- err
						return
					}
					if d.Decision != gate.Deny {
						errs <- fmt.Errorf("descends from the seed email, got %s", d.Decision)
						return
					}
				case 1:
					if _, err := w.E.Trace(ctx, n.ID, lineage.TraceOptions{}); err != nil {
						errs <- err
						return
					}
				case 2:
					if err := w.E.Recall(ctx, session, []string{seed.ID}); err != nil {
						errs <- err
						return
					}
				case 3:
					if r, err := w.E.Verify(ctx); err != nil || !r.OK() {
						errs <- fmt.Errorf("verify under load: %+v %v", r, err)
						return
					}
				case 4:
					if _, err := w.E.Log().Checkpoint(ctx, w.Operator); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := w.E.Log().Checkpoint(ctx, w.Operator); err != nil {
		t.Fatal(err)
	}
	r, err := w.E.Verify(ctx)
	if err != nil || !r.OK() {
		t.Fatalf("verify after: %+v %v", r, err)
	}
}
