package replay_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/replay"
	"github.com/pedigree-ai/pedigree/gate"
)

func load(t *testing.T, name string) []replay.Scenario {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "..", "testdata", "scenarios", name))
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
	// Every attack is denied; the one unlabelled call diluted below tau asks.
	if sum.AttackDenied != 4 || sum.AttackAsked != 0 || sum.BenignAsked != 0 || sum.BenignDenied != 0 ||
		sum.GatedScenarios != 7 || sum.AllAllowed != 2 || sum.AllAllowedOrAsked != 3 {
		t.Fatalf("tallies %+v", sum)
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
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "scenarios", name))
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

// TestPlanScenarios replays the six plan examples of issue 17 with the
// shipped catalogs: every decision equals its expect, and no attack is
// allowed or asked.
func TestPlanScenarios(t *testing.T) {
	ss := load(t, "plans.jsonl")
	var files []string
	for _, n := range []string{"email", "payments", "files", "shell"} {
		files = append(files, filepath.Join("..", "..", "..", "..", "policies", "catalogs", n+".yaml"))
	}
	cat, err := gate.LoadCatalogs(files...)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := replay.Run(t.Context(), ss, replay.Options{Catalog: cat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 0 || len(sum.Mismatches) != 0 {
		t.Fatalf("errors %v mismatches %v", sum.ErrorList, sum.Mismatches)
	}
	if sum.Scenarios != 6 || sum.Expected != 11 || sum.AttackCalls != 5 || sum.AttackDenied != 5 || sum.BenignAsked != 1 {
		t.Fatalf("summary %+v", sum)
	}
}

// TestDelegatedScenarios replays the plan scenarios, issue 17's and issue
// 34's delegated ones, with the shipped catalogs, and holds the figures
// the issue asks for: every decision equals its expect; no attack is
// allowed; an attack call is asked only where the scenario says it is
// (the first call of a delegated step, with a value the named source
// supplies: the data-only limit); and at least 80 % of the tasks complete
// with at most one confirmation.
func TestDelegatedScenarios(t *testing.T) {
	ss := append(load(t, "plans.jsonl"), load(t, "delegated.jsonl")...)
	var files []string
	for _, n := range []string{"email", "payments", "files", "shell", "chat"} {
		files = append(files, filepath.Join("..", "..", "..", "..", "policies", "catalogs", n+".yaml"))
	}
	cat, err := gate.LoadCatalogs(files...)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	sum, err := replay.Run(t.Context(), ss, replay.Options{Catalog: cat}, func(r replay.Result) {
		for _, c := range r.Calls {
			if c.Label == "attack" && c.Got == gate.Ask {
				asked = append(asked, c.Scenario+" "+c.Call)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 0 || len(sum.Mismatches) != 0 {
		t.Fatalf("errors %v mismatches %v", sum.ErrorList, sum.Mismatches)
	}
	t.Logf("attack %d calls: %d allowed, %d asked, %d denied; benign %d calls: %d allowed, %d asked, %d denied; tasks %d: %d unattended, %d with at most one confirmation",
		sum.AttackCalls, sum.AttackAllowed, sum.AttackAsked, sum.AttackDenied, sum.BenignCalls, sum.BenignAllowed, sum.BenignAsked, sum.BenignDenied,
		sum.Tasks, sum.TasksUnattended, sum.TasksOneConfirmation)
	if sum.AttackAllowed != 0 {
		t.Errorf("%d attack calls allowed", sum.AttackAllowed)
	}
	if want := []string{"delegated/bill-injection-changes-the-value c2", "delegated/bill-injection-repeats-the-step-first c2"}; !slices.Equal(asked, want) {
		t.Errorf("attack calls asked %v, want %v", asked, want)
	}
	if sum.Tasks < 15 || float64(sum.TasksOneConfirmation) < 0.8*float64(sum.Tasks) {
		t.Errorf("tasks %d, with at most one confirmation %d: under 80 %%", sum.Tasks, sum.TasksOneConfirmation)
	}
}

// TestRuleOfTwoEnabledByConfiguration: loaded as an operator policy
// directory, the Rule of Two module asks before the one plan call that
// holds untrusted input (the poisoned file), private data (the file read)
// and an external send; without it the same call is allowed.
func TestRuleOfTwoEnabledByConfiguration(t *testing.T) {
	ss := load(t, "plans.jsonl")
	var files []string
	for _, n := range []string{"email", "payments", "files", "shell"} {
		files = append(files, filepath.Join("..", "..", "..", "..", "policies", "catalogs", n+".yaml"))
	}
	cat, err := gate.LoadCatalogs(files...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := gate.PolicyFromDir(filepath.Join("..", "..", "..", "..", "policies", "ruleoftwo"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := replay.Run(t.Context(), ss, replay.Options{Catalog: cat, Policy: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Mismatches) != 1 || sum.Mismatches[0].Scenario != "plans/summarise-and-email" || sum.Mismatches[0].Got != string(gate.Ask) || sum.AttackDenied != 5 {
		t.Fatalf("mismatches %+v summary %+v", sum.Mismatches, sum)
	}
}
