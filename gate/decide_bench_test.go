package gate

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// benchFacts are the facts of `pedigree bench`'s check: a send justified by
// k memory entries, every one descending from an external tool's entry,
// with two arguments that name no sources of their own.
func benchFacts(k int) (*Facts, *lineage.Statement) {
	st := &lineage.Statement{Version: 1, Principal: "agent:bench", Kind: lineage.KindCall, Session: "bench-1",
		Tool: "bench_send", Args: []byte(`{"n":7,"to":"x@example.org"}`)}
	f := &Facts{Statement: st, Call: &lineage.Node{ID: strings.Repeat("c", 64), Principal: "agent:bench", Kind: lineage.KindCall, Tier: registry.Internal},
		Nodes: map[string]*lineage.Node{}, Sources: map[string][]lineage.Source{}, Trajectory: &trajectory.State{}}
	for i := range k {
		id := fmt.Sprintf("%064x", i+1)
		root := fmt.Sprintf("%064x", 1000+i)
		st.Parents = append(st.Parents, lineage.Parent{ID: id, Weight: 1})
		f.Nodes[id] = &lineage.Node{ID: id, Principal: "agent:bench", Kind: lineage.KindMemory, Tier: registry.Internal,
			Effective: registry.External, Reach: registry.External}
		f.Sources[id] = []lineage.Source{{ID: root, Principal: "tool:bench", Tier: registry.External, Path: []string{id, root}, Strong: true}}
	}
	return f, st
}

func benchGate(b *testing.B) *Gate {
	cat := &Catalog{Tools: map[string]Tool{"bench_send": {Irreversible: true, ExternalSink: true, Role: "send"}}}
	g, err := New(context.Background(), WithCatalog(cat))
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkDecide is the gate's part of `pedigree bench`'s decide on 1, 5
// and 20 justification entries: building the input, encoding it for the
// log, and evaluating the default policy (decide, which the memo answers
// after the first), and each part alone.
func BenchmarkDecide(b *testing.B) {
	g := benchGate(b)
	ctx := context.Background()
	now := time.Now()
	for _, k := range []int{1, 5, 20} {
		f, st := benchFacts(k)
		b.Run(fmt.Sprintf("just=%d/decide", k), func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				d := g.NewDecision(st, f.Call.ID, now)
				if _, err := g.Decide(ctx, f, d, now); err != nil || d.Decision != Deny {
					b.Fatal(d, err)
				}
			}
			reportCPU(b, c0)
		})
		b.Run(fmt.Sprintf("just=%d/input", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d := g.NewDecision(st, f.Call.ID, now)
				if _, _, err := g.input(f, d); err != nil {
					b.Fatal(err)
				}
			}
		})
		d := g.NewDecision(st, f.Call.ID, now)
		in, _, err := g.input(f, d)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("just=%d/json", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := appendJSON(make([]byte, 0, 4096), in); err != nil {
					b.Fatal(err)
				}
			}
		})
		// eval reads the policy's value from the memo (every iteration is
		// the same input); eval-fresh evaluates the policy every time.
		for _, fresh := range []bool{false, true} {
			name := "eval"
			if fresh {
				name = "eval-fresh"
			}
			b.Run(fmt.Sprintf("just=%d/%s", k, name), func(b *testing.B) {
				b.ReportAllocs()
				c0 := cpuTime()
				for b.Loop() {
					if v, err := g.evalMemo(ctx, in, now, !fresh); err != nil || v.Decision != Deny {
						b.Fatal(v, err)
					}
				}
				reportCPU(b, c0)
			})
		}
	}
}

// cpuTime is the process's CPU time so far (user and system, every thread:
// the garbage collector's work included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the CPU time per operation since c0: on a machine shared
// with other work it moves much less than the wall time does.
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-µs/op")
}
