//go:build load

package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/bench"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

const (
	loadEntries = 100_000
	loadClients = 16
	loadChecks  = 1000
)

// TestLoad: 16 concurrent clients, 1,000 checks each, on a store of 100k
// entries, over the socket and then in-process; zero errors, and the
// latencies logged (go test -tags load -v).
func TestLoad(t *testing.T) {
	cat := &gate.Catalog{Tools: map[string]gate.Tool{"send": {Role: "send"}}}
	ps := enginetest.Cast(bench.Principals())
	// Build fast (no fsync) with 8 writers; serve durably.
	w := enginetest.NewOnDisk(t, ps, pedigree.WithCatalog(cat), pedigree.WithoutDurabilityUnsafe())
	ids := make([]string, loadEntries)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				i := int(next.Add(1) - 1)
				if i >= loadEntries {
					return
				}
				who := bench.SignerOf(i)
				parents := []lineage.Parent{}
				if i >= 1000 {
					// Parents from entries already built (well below i).
					parents = append(parents, lineage.Parent{ID: ids[r.IntN(i-500)], Weight: 1})
				}
				n, err := w.E.Record(context.Background(), w.Keys[who], pedigree.Entry{Principal: who, Content: []byte(strconv.Itoa(i)), Parents: parents})
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = n.ID
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("built %d entries in %s", loadEntries, time.Since(start).Round(time.Millisecond))
	w.E.Close()
	e, err := pedigree.Open(context.Background(), w.Dir, pedigree.WithCatalog(cat))
	if err != nil {
		t.Fatal(err)
	}
	w.E = e

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, e, server.Options{Ready: func(string, string) { close(ready) }}) }()
	<-ready

	run := func(name string, check func(c int, call pedigree.Call) (*gate.Decision, error)) {
		lat := make([][]time.Duration, loadClients)
		ends := make([][]time.Duration, loadClients) // when each check ended, from t0
		var errs atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for c := range loadClients {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(c), 7))
				for i := range loadChecks {
					just := make([]string, 5)
					for j := range just {
						just[j] = ids[r.IntN(len(ids))]
					}
					call := pedigree.Call{Principal: "agent:bench", Session: fmt.Sprintf("%s-%d", name, c), Tool: "send",
						Args: []byte(fmt.Sprintf(`{"c":%d,"i":%d}`, c, i)), Justification: just}
					s := time.Now()
					d, err := check(c, call)
					if err != nil || (d.Decision != gate.Allow && d.Decision != gate.Deny) {
						if errs.Add(1) < 5 {
							t.Errorf("%s: client %d check %d: %v", name, c, i, err)
						}
						continue
					}
					lat[c] = append(lat[c], time.Since(s))
					ends[c] = append(ends[c], time.Since(t0))
				}
			})
		}
		wg.Wait()
		all := slices.Concat(lat...)
		slices.Sort(all)
		wall := time.Since(t0)
		if errs.Load() != 0 || len(all) != loadClients*loadChecks {
			t.Fatalf("%s: %d errors", name, errs.Load())
		}
		p99 := all[len(all)*99/100]
		t.Logf("%s: %d checks in %s (%.0f/s), p50 %s, p99 %s", name, len(all), wall.Round(time.Millisecond),
			float64(len(all))/wall.Seconds(), all[len(all)/2].Round(time.Microsecond), p99.Round(time.Microsecond))
		t.Logf("%s: the slowest 1 %%: %s", name, tailShape(lat, ends, p99))
	}

	clients := make([]*server.Client, loadClients)
	for i := range clients {
		c, err := server.Dial(context.Background(), w.Dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	key := w.Keys["agent:bench"]
	run("socket", func(c int, call pedigree.Call) (*gate.Decision, error) {
		return clients[c].Check(context.Background(), key, call)
	})
	// PEDIGREE_LOAD_HEAPPROFILE=FILE writes what the heap holds after the
	// socket phase (docs/performance.md: what the collector marks).
	if f := os.Getenv("PEDIGREE_LOAD_HEAPPROFILE"); f != "" {
		runtime.GC()
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(out); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	run("in-process", func(_ int, call pedigree.Call) (*gate.Decision, error) {
		return e.Check(context.Background(), key, call)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r, err := e.Verify(context.Background())
	if err != nil || !r.OK() {
		t.Fatalf("verify after load: %v %v", r.Problems, err)
	}
	t.Logf("verified %d entries after the load", r.Entries)
}

// tailShape says whether the checks at or over p99 came together (a stall
// every client waited out at once: a flush, a compaction, a collection) or
// spread over the run (a queue): the number of 100 ms windows their ends
// fall in, and the share of them in the ten fullest windows.
func tailShape(lat, ends [][]time.Duration, p99 time.Duration) string {
	windows := map[time.Duration]int{}
	n := 0
	for c := range lat {
		for i, d := range lat[c] {
			if d >= p99 {
				windows[ends[c][i]/(100*time.Millisecond)]++
				n++
			}
		}
	}
	counts := make([]int, 0, len(windows))
	for _, k := range windows {
		counts = append(counts, k)
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	top := 0
	for _, k := range counts[:min(10, len(counts))] {
		top += k
	}
	return fmt.Sprintf("%d checks ended in %d windows of 100 ms; the ten fullest windows hold %d of them (%.0f %%)", n, len(windows), top, 100*float64(top)/float64(n))
}
