package fleet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// localEngine is one node alone: an on-disk engine with the fleet's
// principals and catalog, durable (an fsync per group commit).
func localEngine(b *testing.B) *pedigree.Engine {
	b.Helper()
	ctx := context.Background()
	e, err := pedigree.Init(ctx, filepath.Join(b.TempDir(), "local"), pedigree.DefaultTau, pedigree.WithOperatorSigner(fx.operator), pedigree.WithCatalog(fx.catalog))
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range []string{"user:alice", "agent:assistant", "tool:gmail_read"} {
		p := registry.Principal{ID: id, PublicKey: fx.keys[id].Public(), Tier: map[string]registry.Tier{"user:alice": registry.User, "agent:assistant": registry.Internal, "tool:gmail_read": registry.External}[id], Approver: id == "user:alice"}
		if err := e.Bootstrap().AddPrincipal(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Bootstrap().Freeze(ctx, fx.operator); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

func benchRecord(b *testing.B, e *pedigree.Engine) {
	ctx := context.Background()
	session := uniq("bench-record")
	b.ReportAllocs()
	b.SetParallelism(4)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("actor", "writers")))
		i := 0
		for pb.Next() {
			i++
			if _, err := e.Record(ctx, fx.keys["agent:assistant"], pedigree.Entry{Principal: "agent:assistant", Session: session,
				Content: fmt.Appendf(nil, "%p %d %d", pb, i, time.Now().UnixNano()), Parents: []lineage.Parent{}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// Record throughput, 4 writers per core: a fleet node (3 replicas, each
// fsyncing before the quorum acknowledges) against one node alone.
func BenchmarkRecordFleet(b *testing.B) { benchRecord(b, fx.nodes["A"]) }
func BenchmarkRecordLocal(b *testing.B) { benchRecord(b, localEngine(b)) }

// BenchmarkRecordFleetAlone is BenchmarkRecordFleet with nodes B and C
// stopped while it runs (the three servers still replicate every record):
// on this benchmark's one machine, the other nodes' appliers share the
// cores with node A; on machines of their own they would not. They join
// again, and catch up, afterwards.
func BenchmarkRecordFleetAlone(b *testing.B) {
	ctx := context.Background()
	for _, n := range []string{"B", "C"} {
		if err := fx.nodes[n].Close(); err != nil {
			b.Fatal(err)
		}
		delete(fx.nodes, n)
	}
	b.Cleanup(func() {
		for _, n := range []string{"B", "C"} {
			if err := fx.join(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchRecord(b, fx.nodes["A"])
}

func benchCheck(b *testing.B, e *pedigree.Engine) {
	ctx := context.Background()
	session := uniq("bench-check")
	n, err := e.Record(ctx, fx.keys["user:alice"], pedigree.Entry{Principal: "user:alice", Session: session, Content: []byte("pay the bill")})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d, err := e.Check(ctx, fx.keys["agent:assistant"], pedigree.Call{Principal: "agent:assistant", Session: session, Tool: "send_money",
			Args: fmt.Appendf(nil, `{"to":"electric-co","n":%d}`, i), Justification: []string{n.ID}})
		if err != nil || d.Decision != gate.Allow {
			b.Fatalf("%v %v", d, err)
		}
	}
}

// Check latency (a whole check: the call entry and the decision stored),
// one caller: a fleet node against one node alone.
func BenchmarkCheckFleet(b *testing.B) { benchCheck(b, fx.nodes["B"]) }
func BenchmarkCheckLocal(b *testing.B) { benchCheck(b, localEngine(b)) }

// BenchmarkCatchUp times a restarted node applying entries written while
// it was down (-benchtime=1x; -catchup sets how many).
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		if err := fx.nodes["C"].Close(); err != nil {
			b.Fatal(err)
		}
		delete(fx.nodes, "C")
		session := uniq("bench-catchup")
		errs := make(chan error, 8)
		for w := range 8 {
			go func() {
				for i := range *catchup / 8 {
					_, err := fx.nodes["A"].Record(ctx, fx.keys["agent:assistant"], pedigree.Entry{Principal: "agent:assistant", Session: session, Content: fmt.Appendf(nil, "%d %d", w, i), Parents: []lineage.Parent{}})
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		if err := fx.join(ctx, "C"); err != nil {
			b.Fatal(err)
		}
		for {
			s, _ := fx.nodes["C"].Fleet().Status()
			a, _ := fx.nodes["A"].Fleet().Status()
			if s.Applied >= a.Applied {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(float64(*catchup)/time.Since(start).Seconds(), "entries/s")
	}
}
