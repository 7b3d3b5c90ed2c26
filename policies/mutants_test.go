package policies_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/pedigree-ai/pedigree/policies"
)

// regoMutants are textual changes to the embedded default policy, each a
// plausible mistake. The Rego tests must kill every one (some test fails):
// a mutant that survives is a rule no test holds in place.
var regoMutants = []struct{ name, old, new string }{
	{"no per-argument deny", "\tuntrusted_tier[s.effective_tier]\n\tnot delegated_from(arg, s.id)\n}", "\tfalse\n\tnot delegated_from(arg, s.id)\n}"},
	{"delegated source not excused", "\tnot delegated_from(arg, s.id)\n", "\n"},
	{"any source is the delegated one", "\tsome d in arg.delegation.from\n\td == id\n", "\tis_object(arg.delegation)\n"},
	{"delegation outside a delegated slot", "\targ.slot == \"delegated\"\n\tinput.plan.earlier == 0\n", "\tinput.plan.earlier == 0\n"},
	{"repeat outside a delegated slot", "\targ.slot == \"delegated\"\n\tinput.plan.earlier > 0\n", "\tinput.plan.earlier > 0\n"},
	{"delegated trusted source asks", "\tuntrusted_tier[s.effective_tier]\n\tdelegated_from(arg, s.id)\n", "\tdelegated_from(arg, s.id)\n"},
	{"delegated unprotected argument asks", "\tname in protected_args\n\tsome s in arg.sources\n\tuntrusted_tier[s.effective_tier]\n\tdelegated_from", "\tsome s in arg.sources\n\tuntrusted_tier[s.effective_tier]\n\tdelegated_from"},
	{"delegated allows", "} else := \"ask\"\n\ndeny_findings contains f", "} else := \"allow\"\n\ndeny_findings contains f"},
	{"delegated ignores the catalog", `input.tool.on_delegated in {"ask", "deny", "allow"}`, `false`},
	{"on_delegated deny ignored", "\tdelegated_outcome == \"deny\"\n", "\tdelegated_outcome == \"never\"\n"},
	{"on_delegated allow unnamed", "\tcount(delegated_findings) > 0\n", "\tfalse\n"},
	{"delegation holds on a repeat", "\tinput.plan.earlier == 0\n", "\n"},
	{"repeat unnamed", "\tinput.plan.earlier > 0\n\tname in protected_args\n", "\tinput.plan.earlier > 99\n\tname in protected_args\n"},
	{"repeat of an unprotected argument", "\tinput.plan.earlier > 0\n\tname in protected_args\n", "\tinput.plan.earlier > 0\n"},
	{"repeat without the source", "\tcount(arg.delegation.from) > 0\n", "\n"},
	{"unverified is trusted", `"unverified": true, `, ""},
	{"external is trusted", `, "external": true}`, "}"},
	{"unsourced argument excused", "\tnot arg.explicit\n\tname in protected_args\n", "\tnot arg.explicit\n\tname in protected_args\n\tfalse\n"},
	{"empty sources excuse", "\tcount(arg.sources) == 0\n", "\tcount(arg.sources) < 0\n"},
	{"no protected argument passes", "\tcount(protected_args) == 0\n", "\tcount(protected_args) < 0\n"},
	{"tainted context alone asks", "\tcount(deny_findings) > 0\n} else := {\"decision\": \"ask\"", "\tcount(deny_findings) > 99\n} else := {\"decision\": \"ask\""},
	{"steered allows", "} else := \"ask\"\n\n# Where each", "} else := \"allow\"\n\n# Where each"},
	{"steered ignores the catalog", `input.tool.on_steered in {"ask", "deny", "allow"}`, `false`},
	{"ask_on_untrusted ignored", `untrusted_outcome := "ask" if input.tool.ask_on_untrusted == true`, `untrusted_outcome := "ask" if false`},
	{"missing sensitive means not sensitive", "\tinput.tool.sensitive == false\n", "\tnot input.tool.sensitive == true\n"},
	{"unlisted argument unprotected", "protected(name) if not input.tool.args[name]\n", ""},
	{"trusted false still protected", "protected(name) if input.tool.args[name].trusted == true", "protected(name) if input.tool.args[name]"},
	{"weak justification ignored", "\tsome e in input.justification\n\tweak(e)\n", "\tsome e in input.justification\n\tweak(e)\n\tfalse\n"},
	{"weak argument ignored", "\tsome s in arg.sources\n\tweak(s)\n", "\tsome s in arg.sources\n\tweak(s)\n\tfalse\n"},
	{"approval used when not blocked", "\tblocked\n\ta := input.approvals[0]\n", "\ta := input.approvals[0]\n"},
	{"approval unused", "\tblocked\n\ta := input.approvals[0]\n", "\tfalse\n\ta := input.approvals[0]\n"},
	{"no default", "default decision := {\n\t\"decision\": \"deny\",\n\t\"reasons\": [\"policy: no rule produced a decision\"],\n\t\"warnings\": [],\n}\n", ""},
	{"default allows", "default decision := {\n\t\"decision\": \"deny\",", "default decision := {\n\t\"decision\": \"allow\","},
	{"unconditional allow", "\tis_array(input.justification)\n\tis_object(input.arguments)\n", "\ttrue\n"},
	{"trusted ends in allow even when tainted", "\ttainted\n} else := {\"decision\": \"ask\", \"findings\": ask_findings", "\tfalse\n} else := {\"decision\": \"ask\", \"findings\": ask_findings"},
	{"data slot needs no sources", "\tdata_slot[arg.slot]\n", "\tdata_slot[arg.slot]\n\tfalse\n"},
	{"delegated slot needs no sources", `data_slot := {"data": true, "delegated": true}`, `data_slot := {"data": true}`},
	{"empty data sources pass", "unsourced(arg) if count(arg.sources) == 0\n", ""},
	{"untrusted proposer allowed", "\tuntrusted_tier[input.action.principal_tier]\n} else", "\tfalse\n} else"},
	{"warnings dropped", "decision := object.union(verdict, {\"warnings\": warnings})", "decision := object.union(verdict, {\"warnings\": []})"},
	{"reasons lose the tainted justification", `{"rule": "tainted-justification", "entry": e.id}`, `{"rule": "tainted-justification"}`},
}

func TestRegoMutantsAreKilled(t *testing.T) {
	policy, err := fs.ReadFile(policies.FS, "gate/gate.rego")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := fs.ReadFile(policies.FS, "gate/gate_test.rego")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regoMutants {
		t.Run(m.name, func(t *testing.T) {
			if n := strings.Count(string(policy), m.old); n != 1 {
				t.Fatalf("the mutant's text occurs %d times in gate.rego, want once: the table is out of date", n)
			}
			mutated := strings.Replace(string(policy), m.old, m.new, 1)
			failed, err := runRego(t, mutated, string(tests))
			if err != nil {
				t.Fatalf("the mutant does not compile, so it tests nothing: %v", err)
			}
			if failed == 0 {
				t.Errorf("mutant survived: every Rego test passes with %q replaced by %q", m.old, m.new)
			}
		})
	}
}

// runRego runs the Rego tests against a policy and counts the failures.
func runRego(t *testing.T, policy, tests string) (int, error) {
	t.Helper()
	opts := ast.ParserOptions{RegoVersion: ast.RegoV1}
	pm, err := ast.ParseModuleWithOpts("gate/gate.rego", policy, opts)
	if err != nil {
		return 0, err
	}
	tm, err := ast.ParseModuleWithOpts("gate/gate_test.rego", tests, opts)
	if err != nil {
		return 0, err
	}
	ch, err := tester.NewRunner().SetDefaultRegoVersion(ast.RegoV1).RaiseBuiltinErrors(true).
		SetModules(map[string]*ast.Module{"gate/gate.rego": pm, "gate/gate_test.rego": tm}).RunTests(t.Context(), nil)
	if err != nil {
		return 0, err
	}
	failed := 0
	for r := range ch {
		if r.Error != nil || !r.Pass() {
			failed++
		}
	}
	return failed, nil
}
