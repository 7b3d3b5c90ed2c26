package lineage_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// BenchmarkCallStatement measures what a call justified by its session's
// whole context pays for listing that context as its parents: the
// statement validated, encoded, hashed and signed (SignStatement, what
// Engine.Check does) and its node row encoded, at a context of N entries.
// parents=0 is the floor; ref=N is the same call naming the N entries by
// reference (a count and a 64-hex head, see docs/performance.md), with its
// format 3 node row.
func BenchmarkCallStatement(b *testing.B) {
	signer, _, err := registry.GenerateSigner(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, 10, 200, 1000} {
		parents := make([]lineage.Parent, n)
		for i := range parents {
			s := sha256.Sum256(fmt.Appendf(nil, "entry %d", i))
			parents[i] = lineage.Parent{ID: hex.EncodeToString(s[:]), Weight: 1}
		}
		b.Run(fmt.Sprintf("parents=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var bytes int
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				st := &lineage.Statement{Version: 1, Principal: "agent:planner", Kind: lineage.KindCall, Session: "s",
					ContentDigest: lineage.DigestContent(nil), Parents: parents, Tool: "send_money",
					Args: []byte(`{"to":"123-456"}`), Time: "2026-12-02T03:00:00Z"}
				if err := st.Validate(); err != nil {
					b.Fatal(err)
				}
				s, err := lineage.SignStatement(signer, st)
				if err != nil {
					b.Fatal(err)
				}
				row := lineage.NodeRow(&lineage.Node{ID: s.ID(), Principal: st.Principal, Kind: st.Kind, Session: st.Session,
					Tool: st.Tool, Time: st.Time, NParents: n, Parents: parents})
				bytes = len(s.Envelope()) + len(row)
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-µs/op")
			b.ReportMetric(float64(bytes), "stored-B/call")
		})
		if n == 0 {
			continue
		}
		ref := &lineage.ContextRef{N: n, Head: chainHex(ids4(parents))}
		b.Run(fmt.Sprintf("ref=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var bytes int
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				st := &lineage.Statement{Version: 2, Principal: "agent:planner", Kind: lineage.KindCall, Session: "s",
					ContentDigest: lineage.DigestContent(nil), Parents: []lineage.Parent{}, Context: &lineage.ContextRef{N: ref.N, Head: ref.Head},
					Tool: "send_money", Args: []byte(`{"to":"123-456"}`), Time: "2026-12-02T03:00:00Z"}
				if err := st.Validate(); err != nil {
					b.Fatal(err)
				}
				s, err := lineage.SignStatement(signer, st)
				if err != nil {
					b.Fatal(err)
				}
				row := lineage.NodeRow(&lineage.Node{ID: s.ID(), Principal: st.Principal, Kind: st.Kind, Session: st.Session,
					Tool: st.Tool, Time: st.Time, NParents: n, Parents: st.Parents, Context: st.Context})
				bytes = len(s.Envelope()) + len(row)
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-µs/op")
			b.ReportMetric(float64(bytes), "stored-B/call")
		})
	}
}

// cpuTime is the process's user and system time: on a machine shared with
// other work it moves much less than the wall time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
