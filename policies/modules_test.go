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

// The optional policy modules live on disk beside the embedded default
// (policies/ruleoftwo, policies/trajectory): an operator enables one with
// --policies DIR. Each one's Rego tests run against the default policy it
// extends, and none may be in policies.FS, since the default policy is every
// non-test module there.
func TestOptionalModules(t *testing.T) {
	for _, c := range []struct {
		dir string
		min int
	}{{"ruleoftwo", 10}, {"trajectory", 5}} {
		t.Run(c.dir, func(t *testing.T) {
			modules := map[string]*ast.Module{}
			parseRego(t, policies.FS, "", func(name string) bool { return !strings.HasSuffix(name, "_test.rego") }, modules)
			n := len(modules)
			parseRego(t, os.DirFS(c.dir), c.dir+"/", func(string) bool { return true }, modules)
			if n == 0 || len(modules)-n != 2 {
				t.Fatalf("%d default modules, %d of the module: want the policy, the module and its tests", n, len(modules)-n)
			}
			ch, err := tester.NewRunner().SetDefaultRegoVersion(ast.RegoV1).RaiseBuiltinErrors(true).SetModules(modules).RunTests(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			ran := 0
			for r := range ch {
				if !strings.HasPrefix(r.Location.File, c.dir+"/") {
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
				if strings.HasPrefix(name, c.dir+"/") {
					for _, r := range m.Rules {
						if strings.HasPrefix(r.Head.Name.String(), "test_") {
							declared++
						}
					}
				}
			}
			if ran != declared || ran < c.min {
				t.Fatalf("ran %d Rego tests of the module, %d declared", ran, declared)
			}
			if err := fs.WalkDir(policies.FS, ".", func(path string, _ fs.DirEntry, err error) error {
				if err == nil && strings.HasPrefix(path, c.dir) {
					t.Errorf("%s is in policies.FS: the default policy would include the optional module", path)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

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
