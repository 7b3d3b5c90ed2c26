package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

var large = flag.Bool("pedigree.large", false, "also benchmark stores of 100k and 1M entries (slow to build)")

func sizes() []int {
	if *large {
		return []int{10_000, 100_000, 1_000_000}
	}
	return []int{10_000}
}

// graphWorld builds an on-disk store of n entries shaped like `pedigree
// bench`'s, without fsync while building (the building is not measured).
type graphWorld struct {
	w   *enginetest.World
	ids []string
}

var benchCatalog = &gate.Catalog{Tools: map[string]gate.Tool{sensitiveTool: {Role: "send"}}}

func build(b *testing.B, n int) *graphWorld { return buildT(b, n) }

func buildT(b testing.TB, n int) *graphWorld {
	b.Helper()
	w := enginetest.NewOnDisk(b, enginetest.Cast(Principals()), pedigree.WithCatalog(benchCatalog), pedigree.WithoutDurabilityUnsafe())
	g := &graphWorld{w: w, ids: make([]string, 0, n)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		who := SignerOf(i)
		parents := []lineage.Parent{}
		for range r.IntN(4) {
			if len(g.ids) > 0 {
				id := g.ids[r.IntN(len(g.ids))]
				dup := false
				for _, p := range parents {
					dup = dup || p.ID == id
				}
				if !dup {
					parents = append(parents, lineage.Parent{ID: id, Weight: 1})
				}
			}
		}
		g.ids = append(g.ids, w.Record(who, "", "entry "+strconv.Itoa(i), parents).ID)
	}
	// Measure with durable writes, as in normal use: reopen without the
	// no-fsync option the store was built with.
	w.E.Close()
	e, err := pedigree.Open(context.Background(), w.Dir, pedigree.WithCatalog(benchCatalog))
	if err != nil {
		b.Fatal(err)
	}
	w.E = e
	return g
}

func (g *graphWorld) call(r *rand.Rand, k int, i int) pedigree.Call {
	just := make([]string, k)
	for j := range just {
		just[j] = g.ids[r.IntN(len(g.ids))]
	}
	return pedigree.Call{Principal: "agent:bench", Session: "bench", Tool: sensitiveTool, Args: []byte(`{"n":` + strconv.Itoa(i) + `}`), Justification: just}
}

// BenchmarkEngine builds a store of each size once and measures on it:
// record (sign, verify, label, durable commit), the whole check, the
// decision alone and the bare OPA evaluation of the same policy and input
// with 1, 10 and 100 justification entries, and a trace bounded at 1,000
// entries. go test ./internal/bench -bench Engine [-pedigree.large]
func BenchmarkEngine(b *testing.B) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			g := build(b, n)
			ctx := context.Background()
			b.Run("record", func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 4))
				key := g.w.Keys["agent:bench"]
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					parents := []lineage.Parent{{ID: g.ids[r.IntN(len(g.ids))], Weight: 1}, {ID: g.ids[r.IntN(len(g.ids))], Weight: 0.3}}
					if parents[0].ID == parents[1].ID {
						parents = parents[:1]
					}
					if _, err := g.w.E.Record(ctx, key, pedigree.Entry{Principal: "agent:bench", Content: []byte("b" + strconv.Itoa(i)), Parents: parents}); err != nil {
						b.Fatal(err)
					}
				}
			})
			for _, k := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("just=%d/check", k), func(b *testing.B) {
					r := rand.New(rand.NewPCG(5, 6))
					key := g.w.Keys["agent:bench"]
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						if _, err := g.w.E.Check(ctx, key, g.call(r, k, i)); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(fmt.Sprintf("just=%d/decide", k), func(b *testing.B) {
					r := rand.New(rand.NewPCG(5, 6))
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						if _, err := g.w.E.Preview(ctx, g.call(r, k, i)); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(fmt.Sprintf("just=%d/reevaluate", k), func(b *testing.B) {
					// The policy alone on a logged input (decoded from its
					// JSON each time), without the lineage reads.
					r := rand.New(rand.NewPCG(5, 6))
					c := g.call(r, k, 0)
					d, err := g.w.E.Check(ctx, g.w.Keys[c.Principal], c)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := g.w.E.Reevaluate(ctx, d.ID); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run("trace/ancestry=1023", func(b *testing.B) {
				top, err := SummaryTree(ctx, g.w.E, g.w.Keys["agent:bench"], "agent:bench")
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					tr, err := g.w.E.Trace(ctx, top, lineage.TraceOptions{})
					if err != nil {
						b.Fatal(err)
					}
					if len(tr.Nodes) != SummaryTreeSize || tr.Truncated {
						b.Fatalf("trace of %d entries (truncated %v), want %d", len(tr.Nodes), tr.Truncated, SummaryTreeSize)
					}
				}
			})
			b.Run("trace", func(b *testing.B) {
				r := rand.New(rand.NewPCG(7, 8))
				nodes := 0
				b.ReportAllocs()
				for b.Loop() {
					tr, err := g.w.E.Trace(ctx, g.ids[r.IntN(len(g.ids))], lineage.TraceOptions{MaxNodes: 1000})
					if err != nil {
						b.Fatal(err)
					}
					nodes += len(tr.Nodes)
				}
				b.ReportMetric(float64(nodes)/float64(b.N), "nodes/op")
			})
		})
	}
}

// TestRunSmall runs the `pedigree bench` workload at a small size and checks
// that every figure was measured.
func TestRunSmall(t *testing.T) {
	r, err := Run(context.Background(), Options{Entries: 300, Checks: 20, Writers: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 300 || r.RecordPerSec <= 0 || r.RecordP50 <= 0 || r.CheckP50 <= 0 || r.DecideP50 <= 0 || r.TraceP50 <= 0 || r.PeakRSS <= 0 || r.StoreBytes <= 0 || r.Trace1000P50 <= 0 {
		t.Fatalf("unmeasured figures: %+v", r)
	}
	// Tool entries are a tenth of the graph and most entries descend from
	// one: most checks must deny, and none may fail.
	if r.Denied == 0 || r.Denied > r.Checks {
		t.Fatalf("denied %d of %d", r.Denied, r.Checks)
	}
}

// TestRunInMemory: the same workload without a directory; every figure but
// the store's size is measured, and the denials are the durable run's.
func TestRunInMemory(t *testing.T) {
	o := Options{Entries: 300, Checks: 20, Writers: 3, InMemory: true}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.InMemory || r.Entries != 300 || r.RecordPerSec <= 0 || r.RecordP50 <= 0 || r.CheckP50 <= 0 || r.DecideP50 <= 0 || r.TraceP50 <= 0 || r.Trace1000P50 <= 0 || r.StoreBytes != 0 || r.Dir != "" {
		t.Fatalf("figures: %+v", r)
	}
	if r.Denied == 0 || r.Denied > r.Checks {
		t.Fatalf("denied %d of %d", r.Denied, r.Checks)
	}
}

// BenchmarkInMemory: record, check and decide on an in-memory store of 8,000
// entries (the size at which `bench --in-memory` is set beside the Python
// seed), with no fsync: what is left is pedigree's own CPU.
// go test ./internal/bench -run - -bench InMemory -benchtime 2000x
func BenchmarkInMemory(b *testing.B) {
	w := enginetest.New(b, enginetest.Cast(Principals()), pedigree.WithCatalog(benchCatalog))
	g := &graphWorld{w: w}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 8000 {
		parents := []lineage.Parent{}
		if len(g.ids) > 0 {
			parents = append(parents, lineage.Parent{ID: g.ids[r.IntN(len(g.ids))], Weight: 1})
		}
		g.ids = append(g.ids, w.Record(SignerOf(i), "", "entry "+strconv.Itoa(i), parents).ID)
	}
	ctx := context.Background()
	b.Run("record", func(b *testing.B) {
		key := w.Keys["agent:bench"]
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			parents := []lineage.Parent{{ID: g.ids[r.IntN(len(g.ids))], Weight: 1}}
			if _, err := w.E.Record(ctx, key, pedigree.Entry{Principal: "agent:bench", Content: []byte("m" + strconv.Itoa(i)), Parents: parents}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		key := w.Keys["agent:bench"]
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := w.E.Check(ctx, key, g.call(r, 5, i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := w.E.Preview(ctx, g.call(r, 5, i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A call justified by its session's context (a user's prompt and the
	// agent's entries since), at three lengths: the cost should not grow.
	for _, n := range []int{10, 200, 1000} {
		session := "work-" + strconv.Itoa(n)
		w.Record("user:bench", session, "the prompt", nil)
		for j := range n - 1 {
			w.Record("agent:bench", session, "output "+strconv.Itoa(j), nil)
		}
		b.Run(fmt.Sprintf("decide/session=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			defer func() {
				// CPU time (user and system, every thread) per operation:
				// a loaded machine moves it much less than wall time.
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
				b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-µs/op")
			}()
			for i := 0; b.Loop(); i++ {
				call := pedigree.Call{Principal: "agent:bench", Session: session, Tool: sensitiveTool,
					Args: []byte(`{"to":"x@example.org","n":` + strconv.Itoa(i) + `}`)}
				if _, err := w.E.Preview(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
