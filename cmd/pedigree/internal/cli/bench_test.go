package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/bench"
)

// bench --against runs another pedigree binary (here this one, built) on
// the same workload, in turn with this one, and prints the two side by
// side; in JSON, every run of each side.
func TestBenchAgainst(t *testing.T) {
	bin := pedigreeBinary(t)
	c := newEnv(t)
	// This side runs as a process of its own too: the built binary stands
	// for this process's.
	run := func(args ...string) string {
		t.Helper()
		var out, errw bytes.Buffer
		a := &app{in: strings.NewReader(""), out: &out, errw: &errw, getenv: c.getenv, clock: c.clock, executable: bin}
		if code := a.run(t.Context(), args); code != 0 {
			t.Fatalf("pedigree %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errw.String())
		}
		return out.String()
	}
	out := run("-o", "json", "bench", "--entries", "200", "--checks", "10", "--in-memory", "--against", bin, "--runs", "2")
	var cmp bench.Comparison
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatalf("not a comparison: %v\n%s", err, out)
	}
	if cmp.Version != 1 || cmp.Against != bin || cmp.Runs != 2 || len(cmp.Other) != 2 || len(cmp.This) != 2 {
		t.Fatalf("comparison %+v", cmp)
	}
	for _, side := range [][]*bench.Result{cmp.Other, cmp.This} {
		for _, x := range side {
			if x.Entries != 200 || x.Checks != 10 || !x.InMemory || x.RecordPerSec <= 0 || x.DecideP50 <= 0 {
				t.Fatalf("a run of the comparison: %+v", x)
			}
		}
	}
	text := run("bench", "--entries", "200", "--checks", "10", "--in-memory", "--against", bin)
	for _, want := range []string{"1 run(s) of each", "this / other", "record/s", "decide p50 µs", "×"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the side-by-side text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "store MB") {
		t.Fatalf("an in-memory comparison shows a store size:\n%s", text)
	}
}

// What the other binary prints is checked before anything is compared: a
// failing binary, one that prints no result, another version of the
// result, or another workload is an error naming it.
func TestBenchAgainstRefusesWhatItCannotCompare(t *testing.T) {
	c := newEnv(t)
	script := func(name, body string) string {
		p := filepath.Join(c.tmp, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"fails", "echo broken >&2; exit 3", "exit status 3"},
		{"prints nothing", "exit 0", "did not print a bench result"},
		{"prints text", "echo entries 200", "did not print a bench result"},
		{"another version", `echo '{"version": 2, "entries": 100, "checks": 5, "writers": 1, "in_memory": true}'`, "version 2"},
		{"another workload", `echo '{"version": 1, "entries": 99, "checks": 5, "writers": 1, "in_memory": true}'`, "ran another workload"},
		{"durable for in memory", `echo '{"version": 1, "entries": 100, "checks": 5, "writers": 1, "in_memory": false}'`, "ran another workload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := script(strings.ReplaceAll(tc.name, " ", "-"), tc.body)
			r := c.run("bench", "--entries", "100", "--checks", "5", "--in-memory", "--against", bin)
			if r.code != ExitError || !strings.Contains(r.err, tc.want) || !strings.Contains(r.err, bin) {
				t.Fatalf("exit %d, stderr %q; want %d naming %s and %q", r.code, r.err, ExitError, bin, tc.want)
			}
			if r.out != "" {
				t.Fatalf("printed a comparison anyway:\n%s", r.out)
			}
		})
	}
	// A name is a file here, not a program looked up in $PATH.
	t.Chdir(c.tmp)
	script("true", `echo '{"version": 1, "entries": 7, "checks": 5, "writers": 1, "in_memory": true}'`)
	if r := c.run("bench", "--entries", "100", "--checks", "5", "--in-memory", "--against", "true"); r.code != ExitError || !strings.Contains(r.err, filepath.Join(c.tmp, "true")+" ran another workload") {
		t.Fatalf("--against true ran something else than ./true: exit %d, %q", r.code, r.err)
	}
	// The other binary's standard error is the command's.
	r := c.run("bench", "--entries", "100", "--checks", "5", "--in-memory", "--against", script("says", "echo from-the-other-binary >&2; exit 1"))
	if !strings.Contains(r.err, "from-the-other-binary") {
		t.Fatalf("the other binary's standard error was not passed on: %q", r.err)
	}
}
