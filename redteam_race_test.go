package pedigree_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// Checks and records of one session side by side: no check may be refused
// as run on an edited context, since nothing edits it (a read of the
// context older than the session's summary is not a shrunk context).
func TestRedTeamConcurrentChecksInOneSessionAreNotTampering(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	w.Record("user:alice", "s", "pay my bill to 123-456", nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var tampered []error
	for g := range 4 {
		wg.Go(func() {
			for i := range 40 {
				if _, err := w.E.Record(t.Context(), w.Keys["user:alice"], pedigree.Entry{Principal: "user:alice", Session: "s", Content: []byte(fmt.Sprint(g, i))}); err != nil {
					mu.Lock()
					tampered = append(tampered, err)
					mu.Unlock()
				}
				_, err := w.E.Check(t.Context(), w.Keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "send_money", Args: []byte(`{"to":"123-456"}`)})
				if errors.Is(err, registry.ErrTampered) {
					mu.Lock()
					tampered = append(tampered, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(tampered) > 0 {
		t.Fatalf("%d checks or records refused, the first: %v", len(tampered), tampered[0])
	}
}
