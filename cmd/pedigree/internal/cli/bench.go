package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/bench"
)

func newBenchCommand(a *app) *cobra.Command {
	var o bench.Options
	var cpuprofile, memprofile, against string
	var runs int
	var mem memoryLimit
	cmd := &cobra.Command{
		Use:   "bench [--entries N] [--checks M] [--writers W] [--in-memory] [--against OTHER [--runs K]]",
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

--against OTHER runs the same workload with another pedigree binary (an earlier
release, built from another tree) and with this one, in turn, the other first,
--runs times each, each run a process of its own, and prints the two side by
side: each figure's median on both sides and their ratio. Both are run as
BINARY -o json bench with the same --entries, --checks, --writers, --seed,
--in-memory and --tmp (and --memory-limit when given), so the other must be a
release that has them; it must report the same workload, or nothing is compared.

  pedigree bench -o json --entries 10000 --checks 1000 --writers 8
  pedigree bench -o json --entries 8000 --checks 1000 --in-memory
  pedigree bench --entries 100000 --checks 2000 --against ./pedigree-previous --runs 2`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Entries <= 0 || o.Writers <= 0 || o.Checks < 0 {
				return usagef("--entries and --writers must be positive, --checks not negative")
			}
			if o.InMemory && (o.Dir != "" || o.Keep) {
				return usagef("--in-memory has no directory: --tmp and --keep do not apply")
			}
			if against == "" && cmd.Flags().Changed("runs") {
				return usagef("--runs needs --against")
			}
			if runs < 1 || runs > 20 {
				return usagef("--runs %d: from 1 to 20", runs)
			}
			if against != "" {
				if o.Keep {
					return usagef("--keep does not apply with --against (two binaries, several stores)")
				}
				if cpuprofile != "" || memprofile != "" {
					return usagef("--cpuprofile and --memprofile do not apply with --against: each run is a process of its own")
				}
				// A path, never a name looked up in $PATH: the file checked
				// here is the file run.
				abs, err := filepath.Abs(against)
				if err != nil {
					return usagef("--against %s: %v", against, err)
				}
				if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
					return usagef("--against %s: not an executable file", against)
				}
				against = abs
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
			if against != "" {
				// Both sides run as processes of their own, alike: a run
				// inherits no heap, cache or peak RSS from the one before.
				self, err := a.self()
				if err != nil {
					return err
				}
				c := &bench.Comparison{Version: 1, Against: against, Runs: runs}
				for range runs {
					other, err := runBench(cmd, against, o)
					if err != nil {
						return err
					}
					this, err := runBench(cmd, self, o)
					if err != nil {
						return err
					}
					c.Other, c.This = append(c.Other, other), append(c.This, this)
				}
				return a.print(c, func(w io.Writer) { printComparison(w, c) })
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
	f.StringVar(&against, "against", "", "another pedigree binary (an earlier release): run the same workload with it and with this one, in turn, and print the two side by side")
	f.IntVar(&runs, "runs", 1, "with --against: runs of each binary, in turn (the figures shown are each side's medians)")
	mem.add(cmd)
	return cmd
}

// runBench runs the bench of a pedigree binary (the other one, or this
// one again) on the workload o and reads its result; its progress and
// errors go to this command's standard error.
func runBench(cmd *cobra.Command, bin string, o bench.Options) (*bench.Result, error) {
	args := []string{"-o", "json", "bench", "--entries", strconv.Itoa(o.Entries), "--checks", strconv.Itoa(o.Checks),
		"--writers", strconv.Itoa(o.Writers), "--seed", strconv.FormatUint(o.Seed, 10)}
	if o.InMemory {
		args = append(args, "--in-memory")
	}
	if o.Dir != "" {
		args = append(args, "--tmp", o.Dir)
	}
	if f := cmd.Flags().Lookup("memory-limit"); f != nil && f.Changed {
		args = append(args, "--memory-limit", f.Value.String())
	}
	run := exec.CommandContext(cmd.Context(), bin, args...)
	run.Stderr = cmd.ErrOrStderr()
	out, err := run.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	var r bench.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("%s did not print a bench result: %v", bin, err)
	}
	if r.Version != 1 {
		return nil, fmt.Errorf("%s prints bench results of version %d; this pedigree reads version 1", bin, r.Version)
	}
	if r.Entries != o.Entries || r.Checks != o.Checks || r.Writers != o.Writers || r.InMemory != o.InMemory {
		return nil, fmt.Errorf("%s ran another workload (entries %d, checks %d, writers %d, in memory %v): nothing to compare",
			bin, r.Entries, r.Checks, r.Writers, r.InMemory)
	}
	return &r, nil
}

// printComparison prints each figure's median on both sides and this
// side's over the other's; "—" where the other release does not measure it.
func printComparison(w io.Writer, c *bench.Comparison) {
	r := c.This[0]
	fmt.Fprintf(w, "entries %d, writers %d, checks %d", r.Entries, r.Writers, r.Checks)
	if r.InMemory {
		fmt.Fprint(w, ", in memory")
	}
	fmt.Fprintf(w, "; %d run(s) of each, in turn; medians\n", c.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	rows := []struct {
		name string
		get  func(*bench.Result) float64
		// decimals shown; durable: a figure of a store on disk only.
		decimals int
		durable  bool
	}{
		{name: "record/s", get: func(r *bench.Result) float64 { return r.RecordPerSec }},
		{name: "record p50 µs", get: func(r *bench.Result) float64 { return r.RecordP50 }},
		{name: "record p99 µs", get: func(r *bench.Result) float64 { return r.RecordP99 }},
		{name: "check p50 µs", get: func(r *bench.Result) float64 { return r.CheckP50 }},
		{name: "check p99 µs", get: func(r *bench.Result) float64 { return r.CheckP99 }},
		{name: "decide p50 µs", get: func(r *bench.Result) float64 { return r.DecideP50 }},
		{name: "decide p99 µs", get: func(r *bench.Result) float64 { return r.DecideP99 }},
		{name: "decide on the session's context p50 µs", get: func(r *bench.Result) float64 { return r.DecideSessionP50 }},
		{name: "decide on the session's context p99 µs", get: func(r *bench.Result) float64 { return r.DecideSessionP99 }},
		{name: "trace p50 µs", get: func(r *bench.Result) float64 { return r.TraceP50 }},
		{name: "trace of 1,023 ancestors p50 µs", get: func(r *bench.Result) float64 { return r.Trace1000P50 }},
		{name: "peak RSS MB", get: func(r *bench.Result) float64 { return mb(r.PeakRSS) }},
		{name: "peak anonymous MB", get: func(r *bench.Result) float64 { return mb(r.PeakAnon) }},
		{name: "store MB", get: func(r *bench.Result) float64 { return mb(r.StoreBytes) }, durable: true},
		{name: "seconds", get: func(r *bench.Result) float64 { return r.Seconds }, decimals: 1},
	}
	width := 0
	for _, f := range rows {
		width = max(width, utf8.RuneCountInString(f.name))
	}
	fmt.Fprintf(tw, "%s\tother\tthis\tthis / other\t\n", strings.Repeat(" ", width))
	for _, f := range rows {
		if f.durable && r.InMemory {
			continue
		}
		o, t := bench.Median(c.Other, f.get), bench.Median(c.This, f.get)
		num := func(x float64) string { return strconv.FormatFloat(x, 'f', f.decimals, 64) }
		ratio, other := "—", "—"
		if o > 0 {
			ratio, other = fmt.Sprintf("%.2f×", t/o), num(o)
		}
		// The names are padded here: the tab writer aligns every column right.
		name := f.name + strings.Repeat(" ", width-utf8.RuneCountInString(f.name))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, other, num(t), ratio)
	}
	tw.Flush()
}
