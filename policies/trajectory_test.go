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

// parseRego parses the .rego files of fsys that keep says to keep.
func parseRego(t *testing.T, fsys fs.FS, prefix string, keep func(name string) bool, into map[string]*ast.Module) {
	t.Helper()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") || !keep(path) {
			return err
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(prefix+path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		into[prefix+path] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTrajectoryModule runs the Rego tests of the optional trajectory
// module (policies/trajectory, kept out of policies.FS so that the default
// policy never includes it) against the default policy it extends.
func TestTrajectoryModule(t *testing.T) {
	modules := map[string]*ast.Module{}
	parseRego(t, policies.FS, "", func(name string) bool { return !strings.HasSuffix(name, "_test.rego") }, modules)
	n := len(modules)
	parseRego(t, os.DirFS("trajectory"), "trajectory/", func(string) bool { return true }, modules)
	if n == 0 || len(modules)-n != 2 {
		t.Fatalf("%d default modules, %d of the trajectory module: want the policy, the module and its tests", n, len(modules)-n)
	}
	ch, err := tester.NewRunner().SetDefaultRegoVersion(ast.RegoV1).RaiseBuiltinErrors(true).SetModules(modules).RunTests(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for r := range ch {
		if !strings.HasPrefix(r.Location.File, "trajectory/") {
			t.Errorf("%s: a test outside the module ran", r.Name)
		}
		ran++
		if r.Error != nil {
			t.Errorf("%s: error: %v", r.Name, r.Error)
		} else if !r.Pass() {
			t.Errorf("%s: fail", r.Name)
		}
	}
	declared := 0
	for name, m := range modules {
		if strings.HasPrefix(name, "trajectory/") {
			for _, r := range m.Rules {
				if strings.HasPrefix(r.Head.Name.String(), "test_") {
					declared++
				}
			}
		}
	}
	if ran != declared || ran < 5 {
		t.Fatalf("ran %d Rego tests of the trajectory module, %d declared", ran, declared)
	}
}

// TestTrajectoryModuleNotInDefault: the default policy is every non-test
// module of policies.FS, so the optional module must not be in it.
func TestTrajectoryModuleNotInDefault(t *testing.T) {
	err := fs.WalkDir(policies.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(path, "trajectory") {
			t.Errorf("%s is in policies.FS: the default policy would ask on trajectory alerts", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
