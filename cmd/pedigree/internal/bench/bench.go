package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Options size the workload.
type Options struct {
	Entries int
	Checks  int
	Writers int
	// Dir is where the store goes (a new directory inside it); default the
	// system's temporary directory. The store is removed afterwards unless
	// Keep.
	Dir  string
	Keep bool
	Seed uint64
	// InMemory runs the workload on an in-memory store (no directory, no
	// fsync): the same figures, to set beside in-memory systems.
	InMemory bool
	// Progress, when set, is called now and then with what is done.
	Progress func(phase string, done, total int)
}

// Result is what `bench -o json` prints.
type Result struct {
	Version      int     `json:"version"`
	Entries      int     `json:"entries"`
	Writers      int     `json:"writers"`
	InMemory     bool    `json:"in_memory"`
	Checks       int     `json:"checks"`
	RecordPerSec float64 `json:"record_per_sec"`
	RecordP50    float64 `json:"record_p50_us"`
	RecordP99    float64 `json:"record_p99_us"`
	CheckP50     float64 `json:"check_p50_us"`
	CheckP99     float64 `json:"check_p99_us"`
	DecideP50    float64 `json:"decide_p50_us"`
	DecideP99    float64 `json:"decide_p99_us"`
	// DecideSessionP50 and P99 are decide on a call justified by its
	// session's context, as an agent's calls are: 16 sessions, each a
	// user's prompt and the agent's entries since, one more after every
	// call (30 at first, about 30 + checks/16 at the end).
	DecideSessionP50 float64 `json:"decide_session_p50_us"`
	DecideSessionP99 float64 `json:"decide_session_p99_us"`
	TraceP50         float64 `json:"trace_p50_us"`
	TraceP99         float64 `json:"trace_p99_us"`
	TraceNodes       float64 `json:"trace_nodes_p50"`
	// Trace1000P50 is the p50 of a whole trace of an entry with 1,023
	// ancestors (a tree of summaries of summaries, see SummaryTree).
	Trace1000P50 float64 `json:"trace_1000_p50_us"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	PeakAnon     int64   `json:"peak_anon_bytes"`
	// MemoryLimit is the Go runtime's soft memory limit during the run
	// (0: none).
	MemoryLimit int64   `json:"memory_limit_bytes"`
	StoreBytes  int64   `json:"store_bytes"`
	Denied      int     `json:"denied"`
	Seconds     float64 `json:"seconds"`
	Dir         string  `json:"dir,omitempty"`
}

// Comparison is what `bench --against OTHER -o json` prints: the same
// workload run by another pedigree binary and by this one, in turn (the
// other first), each side's results in the order they ran.
type Comparison struct {
	Version int       `json:"version"`
	Against string    `json:"against"`
	Runs    int       `json:"runs"`
	Other   []*Result `json:"other"`
	This    []*Result `json:"this"`
}

// Median is the median of f over rs (the lower of the middle two when
// there is an even number).
func Median(rs []*Result, f func(*Result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

const sensitiveTool = "bench_send"

// Run builds the store and measures. Writes are durable, as in normal use,
// unless InMemory.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Entries <= 0 || o.Checks < 0 || o.Writers <= 0 {
		return nil, fmt.Errorf("bench: entries and writers must be positive, checks not negative")
	}
	if o.Progress == nil {
		o.Progress = func(string, int, int) {}
	}
	start := time.Now()
	stopSampling := sampleAnon()
	cat := &gate.Catalog{Tools: map[string]gate.Tool{sensitiveTool: {Irreversible: true, ExternalSink: true, Role: "send"}}}
	e, op, dir, err := open(ctx, o, cat)
	if err != nil {
		return nil, err
	}
	if dir != "" && !o.Keep {
		defer os.RemoveAll(dir)
	}
	defer e.Close()
	keys := map[string]*registry.Signer{}
	for _, p := range Principals() {
		s, _, err := registry.GenerateSigner(nil)
		if err != nil {
			return nil, err
		}
		keys[p.ID] = s
		p.PublicKey = s.Public()
		if err := e.Bootstrap().AddPrincipal(ctx, p); err != nil {
			return nil, err
		}
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		return nil, err
	}

	// Record: entry i is signed by the tool when i%10 == 0, by the user when
	// i%3 == 0, else by the agent, with 0 to 3 parents drawn uniformly from
	// the entries already stored.
	// IDs are kept as raw bytes: the harness's own bookkeeping is in the
	// measured RSS, and hex strings would be 80 MB of it at 1M entries.
	ids := make([][32]byte, 0, o.Entries)
	var mu sync.Mutex
	var next atomic.Int64
	lat := make([][]time.Duration, o.Writers)
	errs := make(chan error, o.Writers)
	recStart := time.Now()
	var wg sync.WaitGroup
	for w := range o.Writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(o.Seed, uint64(w)+1))
			for {
				i := int(next.Add(1) - 1)
				if i >= o.Entries || ctx.Err() != nil {
					return
				}
				who := SignerOf(i)
				mu.Lock()
				n := len(ids)
				var parents []lineage.Parent
				if n > 0 {
					k := r.IntN(4)
					seen := map[int]bool{}
					for range k {
						j := r.IntN(n)
						if !seen[j] {
							seen[j] = true
							parents = append(parents, lineage.Parent{ID: hex.EncodeToString(ids[j][:]), Weight: 1})
						}
					}
				}
				mu.Unlock()
				if parents == nil {
					parents = []lineage.Parent{}
				}
				t0 := time.Now()
				node, err := e.Record(ctx, keys[who], pedigree.Entry{Principal: who, Kind: lineage.KindMemory, Content: []byte("bench entry " + strconv.Itoa(i)), Parents: parents})
				if err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
				var raw [32]byte
				if _, err := hex.Decode(raw[:], []byte(node.ID)); err != nil {
					errs <- fmt.Errorf("entry ID %q: %w", node.ID, err)
					return
				}
				mu.Lock()
				ids = append(ids, raw)
				done := len(ids)
				mu.Unlock()
				if done%1000 == 0 {
					o.Progress("record", done, o.Entries)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recTime := time.Since(recStart)
	all := slices.Concat(lat...)
	res := &Result{Version: 1, Entries: o.Entries, Writers: o.Writers, Checks: o.Checks, InMemory: o.InMemory,
		RecordPerSec: float64(o.Entries) / recTime.Seconds(), RecordP50: pct(all, 50), RecordP99: pct(all, 99)}

	// Checks: a sensitive tool justified by 5 random entries, first the
	// decision alone, then the whole durable check.
	r := rand.New(rand.NewPCG(o.Seed, 99))
	var decideLat, checkLat, traceLat []time.Duration
	var traceNodes []time.Duration
	for i := range o.Checks {
		just := make([]string, 5)
		for j := range just {
			just[j] = hex.EncodeToString(ids[r.IntN(len(ids))][:])
		}
		call := pedigree.Call{Principal: "agent:bench", Session: "bench-" + strconv.Itoa(i%16), Tool: sensitiveTool,
			Args: []byte(`{"to":"x@example.org","n":` + strconv.Itoa(i) + `}`), Justification: just}
		t0 := time.Now()
		if _, err := e.Preview(ctx, call); err != nil {
			return nil, err
		}
		decideLat = append(decideLat, time.Since(t0))
		t0 = time.Now()
		d, err := e.Check(ctx, keys["agent:bench"], call)
		if err != nil {
			return nil, err
		}
		checkLat = append(checkLat, time.Since(t0))
		if d.Decision == gate.Deny {
			res.Denied++
		}
		t0 = time.Now()
		tr, err := e.Trace(ctx, just[0], lineage.TraceOptions{})
		if err != nil {
			return nil, err
		}
		traceLat = append(traceLat, time.Since(t0))
		traceNodes = append(traceNodes, time.Duration(len(tr.Nodes)))
		if (i+1)%100 == 0 {
			o.Progress("check", i+1, o.Checks)
		}
	}
	res.DecideP50, res.DecideP99 = pct(decideLat, 50), pct(decideLat, 99)
	if err := sessionDecide(ctx, e, keys, o.Checks, res); err != nil {
		return nil, err
	}
	res.CheckP50, res.CheckP99 = pct(checkLat, 50), pct(checkLat, 99)
	res.TraceP50, res.TraceP99 = pct(traceLat, 50), pct(traceLat, 99)
	if len(traceNodes) > 0 {
		slices.Sort(traceNodes)
		res.TraceNodes = float64(traceNodes[len(traceNodes)/2])
	}
	top, err := SummaryTree(ctx, e, keys["agent:bench"], "agent:bench")
	if err != nil {
		return nil, err
	}
	var tree []time.Duration
	for range 50 {
		t0 := time.Now()
		tr, err := e.Trace(ctx, top, lineage.TraceOptions{})
		if err != nil {
			return nil, err
		}
		tree = append(tree, time.Since(t0))
		if len(tr.Nodes) != SummaryTreeSize || tr.Truncated {
			return nil, fmt.Errorf("summary tree trace: %d entries (truncated %v), want %d", len(tr.Nodes), tr.Truncated, SummaryTreeSize)
		}
	}
	res.Trace1000P50 = pct(tree, 50)
	if dir != "" {
		res.StoreBytes = dirSize(dir)
	}
	res.PeakRSS = peakRSS()
	res.PeakAnon = stopSampling()
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		res.MemoryLimit = l
	}
	res.Seconds = time.Since(start).Seconds()
	if o.Keep && dir != "" {
		res.Dir = dir
	}
	return res, nil
}

// sessionDecide measures decide on calls justified by their session's
// context (see Result.DecideSessionP50).
func sessionDecide(ctx context.Context, e *pedigree.Engine, keys map[string]*registry.Signer, checks int, res *Result) error {
	const sessions, start = 16, 30
	record := func(who, session string, n int) error {
		_, err := e.Record(ctx, keys[who], pedigree.Entry{Principal: who, Kind: lineage.KindToolOutput, Session: session,
			Content: []byte("session entry " + strconv.Itoa(n))})
		return err
	}
	for s := range sessions {
		session := "work-" + strconv.Itoa(s)
		if err := record("user:bench", session, 0); err != nil {
			return err
		}
		for n := range start {
			if err := record("agent:bench", session, n+1); err != nil {
				return err
			}
		}
	}
	var lat []time.Duration
	for i := range checks {
		session := "work-" + strconv.Itoa(i%sessions)
		call := pedigree.Call{Principal: "agent:bench", Session: session, Tool: sensitiveTool,
			Args: []byte(`{"to":"x@example.org","n":` + strconv.Itoa(i) + `}`)}
		t0 := time.Now()
		if _, err := e.Preview(ctx, call); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		if err := record("agent:bench", session, start+1+i); err != nil {
			return err
		}
	}
	res.DecideSessionP50, res.DecideSessionP99 = pct(lat, 50), pct(lat, 99)
	return nil
}

// open makes the engine the workload runs on, with its operator key: a new
// data directory (returned, for the caller to remove), or an in-memory
// store.
func open(ctx context.Context, o Options, cat *gate.Catalog) (*pedigree.Engine, *registry.Signer, string, error) {
	if o.InMemory {
		op, _, err := registry.GenerateSigner(nil)
		if err != nil {
			return nil, nil, "", err
		}
		e, err := pedigree.NewInMemory(ctx, pedigree.DefaultTau, op, pedigree.WithCatalog(cat))
		return e, op, "", err
	}
	parent := o.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "pedigree-bench-")
	if err != nil {
		return nil, nil, "", err
	}
	// The operator and engine keys stay in memory: nothing is written
	// beside the store.
	op, _, err := registry.GenerateSigner(nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, "", err
	}
	ek, _, err := registry.GenerateSigner(nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, "", err
	}
	e, err := pedigree.Init(ctx, dir, pedigree.DefaultTau, pedigree.WithCatalog(cat), pedigree.WithOperatorSigner(op), pedigree.WithEngineSigner(ek))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, "", err
	}
	return e, op, dir, nil
}

// Principals are the workload's principals, without keys: an agent
// (internal), a user and a tool (external).
func Principals() []registry.Principal {
	return []registry.Principal{{ID: "agent:bench", Tier: registry.Internal}, {ID: "user:bench", Tier: registry.User}, {ID: "tool:bench", Tier: registry.External}}
}

// SignerOf is the principal that signs the workload's entry i: the tool
// when i%10 == 0, else the user when i%3 == 0, else the agent.
func SignerOf(i int) string {
	switch {
	case i%10 == 0:
		return "tool:bench"
	case i%3 == 0:
		return "user:bench"
	}
	return "agent:bench"
}

// SummaryTreeSize is the number of entries SummaryTree records.
const SummaryTreeSize = 1023

// SummaryTree records a binary tree of summaries by principal: 512 entries
// without parents, then each level summarising pairs of the level below,
// up to one entry whose ancestry is the whole tree (1,023 entries, depth
// 9). It returns that entry's ID: the trace target for "an ancestry of
// 1,000 entries".
func SummaryTree(ctx context.Context, e *pedigree.Engine, key *registry.Signer, principal string) (string, error) {
	level := make([]string, 512)
	for i := range level {
		n, err := e.Record(ctx, key, pedigree.Entry{Principal: principal, Kind: lineage.KindMemory, Content: []byte("leaf " + strconv.Itoa(i)), Parents: []lineage.Parent{}})
		if err != nil {
			return "", err
		}
		level[i] = n.ID
	}
	for len(level) > 1 {
		next := make([]string, len(level)/2)
		for i := range next {
			n, err := e.Record(ctx, key, pedigree.Entry{Principal: principal, Kind: lineage.KindSummary, Content: []byte("summary " + strconv.Itoa(i)),
				Parents: []lineage.Parent{{ID: level[2*i], Weight: 1}, {ID: level[2*i+1], Weight: 1}}})
			if err != nil {
				return "", err
			}
			next[i] = n.ID
		}
		level = next
	}
	return level[0], nil
}

// pct is the p-th percentile in microseconds.
func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return float64(s[i].Nanoseconds()) / 1e3
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// peakRSS reads the process's high-water resident set (VmHWM) from /proc;
// 0 where there is no /proc. It counts the pages of Badger's memory-mapped
// tables that were read, which the kernel can reclaim; PeakAnon does not.
func peakRSS() int64 { return procStatus("VmHWM:") }

// sampleAnon samples the process's anonymous resident memory (RssAnon:
// heap, stacks, Badger's buffers) every 50 ms until the returned function
// is called, which returns the highest sample.
func sampleAnon() func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v := procStatus("RssAnon:"); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}

func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
