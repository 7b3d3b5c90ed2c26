package replay_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/internal/replay"
)

func load(t *testing.T, name string) []replay.Scenario {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "scenarios", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, bad, err := replay.Parse(f)
	if err != nil || len(bad) > 0 {
		t.Fatalf("parse %s: %v %v", name, err, bad)
	}
	return ss
}

// TestLaunderingChannels replays a scenario for every laundering channel
// we know; each call's decision must equal its expect.
func TestLaunderingChannels(t *testing.T) {
	ss := load(t, "laundering.jsonl")
	sum, err := replay.Run(t.Context(), ss, replay.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 0 || len(sum.Mismatches) != 0 {
		t.Fatalf("errors %v mismatches %v", sum.ErrorList, sum.Mismatches)
	}
	if sum.Scenarios != 7 || sum.Expected != 7 || sum.Agreed != 7 || sum.AttackCalls != 4 || sum.AttackAllowed != 0 || sum.BenignAllowed != 2 {
		t.Fatalf("summary %+v", sum)
	}
}

// TestRefusedScenarios: what the engine rejects is an error in the summary,
// never skipped, unless the scenario expects it (expect_error).
func TestRefusedScenarios(t *testing.T) {
	ss := load(t, "refused.jsonl")
	want := map[string]string{
		"refused/missing-parent":        "unknown parent",
		"refused/unlisted-principal":    "unknown principal",
		"refused/unknown-justification": "names no earlier step",
	}
	sum, err := replay.Run(t.Context(), ss, replay.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 0 || sum.Refused != len(want) || sum.Failed() {
		t.Fatalf("as written, with expect_error: %+v", sum)
	}

	// Without expect_error, each refusal is an error, and says why.
	plain := append([]replay.Scenario(nil), ss...)
	for i := range plain {
		plain[i].ExpectError = ""
	}
	sum, err = replay.Run(t.Context(), plain, replay.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != len(want) || sum.Refused != 0 || !sum.Failed() {
		t.Fatalf("without expect_error: %+v", sum)
	}
	for _, e := range sum.ErrorList {
		if !strings.Contains(e.Error, want[e.Scenario]) {
			t.Errorf("%s: %q does not say %q", e.Scenario, e.Error, want[e.Scenario])
		}
	}

	// Expecting another error, or an error from a scenario that runs to
	// the end, is a mismatch.
	other := ss[0]
	other.ExpectError = "disk on fire"
	accepted := load(t, "laundering.jsonl")[0]
	accepted.ExpectError = "unknown parent"
	sum, err = replay.Run(t.Context(), []replay.Scenario{other, accepted}, replay.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 2 || sum.Refused != 0 || !sum.Failed() {
		t.Fatalf("wrong expectations: %+v", sum)
	}
	if e := sum.ErrorList[0].Error; !strings.Contains(e, `expected to be refused with "disk on fire", refused with: `) || !strings.Contains(e, "unknown parent") {
		t.Errorf("another error: %s", e)
	}
	if e := sum.ErrorList[1].Error; !strings.Contains(e, "every step was accepted") {
		t.Errorf("accepted: %s", e)
	}
}

func TestParseRejects(t *testing.T) {
	for name, line := range map[string]string{
		"unknown field": `{"id":"x","principals":[{"id":"user:a","tier":"user"}],"sensitive":[],"steps":[],"bogus":1}`,
		"unknown op":    `{"id":"x","principals":[{"id":"user:a","tier":"user"}],"sensitive":[],"steps":[{"op":"delete","ref":"a"}]}`,
		"no id":         `{"principals":[{"id":"user:a","tier":"user"}],"steps":[]}`,
		"dup ref":       `{"id":"x","principals":[{"id":"user:a","tier":"user"}],"steps":[{"op":"record","ref":"a","principal":"user:a","kind":"prompt"},{"op":"record","ref":"a","principal":"user:a","kind":"prompt"}]}`,
		"bad expect":    `{"id":"x","principals":[{"id":"user:a","tier":"user"}],"steps":[{"op":"call","ref":"a","tool":"t","expect":"maybe"}]}`,
		"not json":      `{"id":`,
	} {
		if _, err := replay.ParseLine([]byte(line)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, name := range []string{"laundering.jsonl", "refused.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "scenarios", name))
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f.Add([]byte(line))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s, err := replay.ParseLine(line)
		if err != nil {
			return
		}
		if s.ID == "" {
			t.Fatal("accepted a scenario without an id")
		}
		// Whatever parses must replay to a result or a reported error,
		// never a panic.
		if len(s.Steps) <= 20 {
			replay.Run(t.Context(), []replay.Scenario{*s}, replay.Options{Workers: 1}, nil)
		}
	})
}
