package policies_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/pedigree-ai/pedigree/policies"
)

// TestBundle compiles the embedded bundle and runs its Rego tests, so a
// broken policy fails `go test ./...`.
func TestBundle(t *testing.T) {
	modules := map[string]*ast.Module{}
	err := fs.WalkDir(policies.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
			return err
		}
		src, err := fs.ReadFile(policies.FS, path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		modules[path] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(modules) < 2 {
		t.Fatalf("found %d modules, want the policy and its tests", len(modules))
	}
	ch, err := tester.NewRunner().SetDefaultRegoVersion(ast.RegoV1).RaiseBuiltinErrors(true).SetModules(modules).RunTests(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range ch {
		n++
		if r.Error != nil {
			t.Errorf("%s: error: %v", r.Name, r.Error)
		} else if !r.Pass() {
			t.Errorf("%s: fail", r.Name)
		}
	}
	if n < 10 {
		t.Fatalf("ran %d Rego tests, want at least 10", n)
	}
}
