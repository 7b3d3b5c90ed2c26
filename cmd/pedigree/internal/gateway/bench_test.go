package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree/registry"
)

// The catalog of the benchmark: the filesystem server is trusted here
// (internal), so a sensitive write stays allowed call after call and the
// gated path is check, forward and record, every time.
const catalogBench = `tools:
  fs.read_text_file: {sensitive: false}
  fs.write_file: {sensitive: true, irreversible: true}
`

// sessionCalls are how many calls one MCP session makes before the
// benchmark opens the next. Every result joins the session's context and
// every call is justified by the whole context, so a call late in a long
// session costs more (the gate reads and evaluates every entry).
var sessionCalls = []int{10, 200, 1000}

// thinkPause is how long the paused runs wait between calls, outside the
// timer: a host's model takes far longer than this between two tool calls,
// time in which the gateway commits the last result's output entry. The
// runs without a pause are calls back to back, where the next call waits
// for that commit.
const thinkPause = 5 * time.Millisecond

// BenchmarkRoundTrip is one tools/call from the client's side, through the
// gateway (durable store) and directly to the same reference server, for a
// call the catalog says is not sensitive and for a gated one, back to back
// and with a pause between calls. It reports p50 and p99 besides the mean.
//
//	go test ./internal/gateway -run '^$' -bench RoundTrip -benchtime 2000x
func BenchmarkRoundTrip(b *testing.B) {
	w := buildWorld(b, catalogBench, registry.Internal, true)
	file := filepath.Join(w.work, "poisoned.txt")
	out := filepath.Join(w.work, "out", "bench.txt")
	calls := []struct {
		name, tool string
		args       map[string]any
	}{
		{"read", "read_text_file", map[string]any{"path": file}},
		{"gated-write", "write_file", map[string]any{"path": out, "content": "x"}},
	}
	for _, c := range calls {
		for _, pause := range []time.Duration{0, thinkPause} {
			suffix := ""
			if pause > 0 {
				suffix = "/pause=" + pause.String()
			}
			b.Run(c.name+"/direct"+suffix, func(b *testing.B) {
				ctx := context.Background()
				cs, _, err := Connect(ctx, w.ups[0], nil)
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				measure(b, pause, func() *mcp.ClientSession { return cs }, c.tool, c.args)
			})
			// The floor under the gateway: a plain MCP proxy built with
			// the same SDK, in the same place (an in-memory connection to
			// the client, the upstream's stdio behind it), that only
			// relays: no engine, no record, no decision.
			b.Run(c.name+"/proxy"+suffix, func(b *testing.B) {
				cs := plainProxy(b, w.ups[0])
				measure(b, pause, func() *mcp.ClientSession { return cs }, c.tool, c.args)
			})
			for _, per := range sessionCalls {
				if pause > 0 && per != sessionCalls[0] {
					continue
				}
				b.Run(fmt.Sprintf("%s/gateway/session=%d%s", c.name, per, suffix), func(b *testing.B) {
					var cur *client
					n := 0
					measure(b, pause, func() *mcp.ClientSession {
						if cur == nil || n == per {
							b.StopTimer()
							cur, n = w.connect(b, "2025-11-25", ""), 0
							b.StartTimer()
						}
						n++
						return cur.cs
					}, c.tool, c.args)
				})
			}
		}
	}
}

func measure(b *testing.B, pause time.Duration, session func() *mcp.ClientSession, tool string, args map[string]any) {
	b.ReportAllocs()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
		cs := session()
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		lat = append(lat, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// plainProxy connects a client to an MCP server that relays every tool of
// up to it, and does nothing else.
func plainProxy(b *testing.B, up Upstream) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	ucs, tools, err := Connect(ctx, up, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ucs.Close() })
	s := mcp.NewServer(&mcp.Implementation{Name: "plain-proxy", Version: "1"}, nil)
	for _, t := range tools {
		s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return ucs.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
		})
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}
