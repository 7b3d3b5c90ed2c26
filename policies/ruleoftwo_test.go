package policies_test

import (
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/pedigree-ai/pedigree/policies"
)

// TestRuleOfTwoModule runs the Rego tests of the optional Rule of Two
// module (policies/ruleoftwo, not in policies.FS) against the default
// policy it extends.
func TestRuleOfTwoModule(t *testing.T) {
	modules := map[string]*ast.Module{}
	parseRego(t, policies.FS, "", func(name string) bool { return !strings.HasSuffix(name, "_test.rego") }, modules)
	n := len(modules)
	parseRego(t, os.DirFS("ruleoftwo"), "ruleoftwo/", func(string) bool { return true }, modules)
	if n == 0 || len(modules)-n != 2 {
		t.Fatalf("%d default modules, %d of the module: want the policy, the module and its tests", n, len(modules)-n)
	}
	ch, err := tester.NewRunner().SetDefaultRegoVersion(ast.RegoV1).RaiseBuiltinErrors(true).SetModules(modules).RunTests(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for r := range ch {
		if !strings.HasPrefix(r.Location.File, "ruleoftwo/") {
			t.Errorf("%s: a test outside the module ran", r.Name)
		}
		ran++
		if r.Error != nil {
			t.Errorf("%s: error: %v", r.Name, r.Error)
		} else if !r.Pass() {
			t.Errorf("%s: fail", r.Name)
		}
	}
	if ran < 10 {
		t.Fatalf("ran %d Rego tests of the module", ran)
	}
}

// TestRuleOfTwoNotInDefault: the default policy is every non-test module of
// policies.FS, so the optional module must not be in it.
func TestRuleOfTwoNotInDefault(t *testing.T) {
	err := fs.WalkDir(policies.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(path, "ruleoftwo") {
			t.Errorf("%s is in policies.FS: the default policy would include the Rule of Two", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
