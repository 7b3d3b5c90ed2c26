package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/bench"
)

func newBenchCommand(a *app) *cobra.Command {
	var o bench.Options
	var cpuprofile, memprofile string
	var mem memoryLimit
	cmd := &cobra.Command{
		Use:   "bench [--entries N] [--checks M] [--writers W] [--in-memory]",
		Short: "Measure record, check, decide and trace on a synthetic workload",
		Long: `Build a store in a temporary directory with three principals (agent:bench
internal, user:bench user, tool:bench external) and N entries, where entry i is
signed by the tool if i%10 == 0, by the user if i%3 == 0, else by the agent, each
with 0 to 3 parents drawn uniformly from earlier entries, written by W concurrent
writers. Then run M gate checks of a sensitive tool, each justified by 5 random
entries. Writes are durable, as in normal use.

"check" is a whole gate check (the call entry and the decision durably stored);
"decide" is the decision alone (lineage look-ups, input, policy evaluation); "trace"
is a bounded lineage trace of a random entry, and "trace_1000" a whole trace of an
entry with 1,023 ancestors (a tree of summaries recorded after the checks). Peak RSS
and store size are measured.

--in-memory runs the same workload on an in-memory store (no directory, no
fsync: nothing is durable), to compare with in-memory systems; the durable
figures are what a data directory gives.

  pedigree bench -o json --entries 10000 --checks 1000 --writers 8
  pedigree bench -o json --entries 8000 --checks 1000 --in-memory`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Entries <= 0 || o.Writers <= 0 || o.Checks < 0 {
				return usagef("--entries and --writers must be positive, --checks not negative")
			}
			if o.InMemory && (o.Dir != "" || o.Keep) {
				return usagef("--in-memory has no directory: --tmp and --keep do not apply")
			}
			if err := mem.apply(cmd); err != nil {
				return err
			}
			if f, ok := a.errw.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				o.Progress = func(phase string, done, total int) {
					fmt.Fprintf(f, "\r%-6s %3d%% %d/%d ", phase, done*100/total, done, total)
					if done == total {
						fmt.Fprintln(f)
					}
				}
			}
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			r, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if memprofile != "" {
				f, err := os.Create(memprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
					return err
				}
			}
			return a.print(r, func(w io.Writer) {
				fmt.Fprintf(w, "entries %d, writers %d, checks %d, %.1fs\n", r.Entries, r.Writers, r.Checks, r.Seconds)
				fmt.Fprintf(w, "record  %.0f/s   p50 %.0f µs  p99 %.0f µs\n", r.RecordPerSec, r.RecordP50, r.RecordP99)
				fmt.Fprintf(w, "check   p50 %.0f µs  p99 %.0f µs   (%d denied)\n", r.CheckP50, r.CheckP99, r.Denied)
				fmt.Fprintf(w, "decide  p50 %.0f µs  p99 %.0f µs\n", r.DecideP50, r.DecideP99)
				fmt.Fprintf(w, "decide, justified by the session's context  p50 %.0f µs  p99 %.0f µs\n", r.DecideSessionP50, r.DecideSessionP99)
				fmt.Fprintf(w, "trace   p50 %.0f µs  p99 %.0f µs  (%.0f entries p50); of 1,023 ancestors p50 %.0f µs\n", r.TraceP50, r.TraceP99, r.TraceNodes, r.Trace1000P50)
				store := fmt.Sprintf("store %.1f MB", float64(r.StoreBytes)/1e6)
				if r.InMemory {
					store = "store in memory (not durable)"
				}
				fmt.Fprintf(w, "peak RSS %.1f MB (anonymous %.1f MB), %s", float64(r.PeakRSS)/1e6, float64(r.PeakAnon)/1e6, store)
				if r.MemoryLimit > 0 {
					fmt.Fprintf(w, ", Go memory limit %d MiB", r.MemoryLimit>>20)
				}
				fmt.Fprintln(w)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Entries, "entries", 10000, "entries to record")
	f.IntVar(&o.Checks, "checks", 1000, "gate checks to run")
	f.IntVar(&o.Writers, "writers", 1, "concurrent writers")
	f.StringVar(&o.Dir, "tmp", "", "where to build the store (default: the system's temporary directory)")
	f.BoolVar(&o.Keep, "keep", false, "keep the store afterwards")
	f.BoolVar(&o.InMemory, "in-memory", false, "run on an in-memory store: nothing durable, no directory")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile here (go tool pprof)")
	f.StringVar(&memprofile, "memprofile", "", "write a heap profile here at the end (go tool pprof)")
	mem.add(cmd)
	return cmd
}
