package store_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHeavyDependenciesStayInTheirPackage fails when Badger, OPA, sigstore or
// the graph library is imported outside the one package that owns it: the
// rest of the code talks to our own small types.
func TestHeavyDependenciesStayInTheirPackage(t *testing.T) {
	owners := map[string][]string{
		"github.com/dgraph-io/badger":        {"internal/store"},
		"github.com/google/btree":            {"internal/store"},
		"github.com/open-policy-agent/opa":   {"gate", "policies"},
		"github.com/sigstore/sigstore":       {"registry", "testkit/kmstest"}, // kmstest: the KMS fakes speak to sigstore's clients
		"github.com/secure-systems-lab":      {"registry"},
		"github.com/dominikbraun/graph":      {"lineage"},
		"github.com/transparency-dev/merkle": {"tlog"},
		"github.com/nats-io":                 {"internal/fleet"},
		"github.com/modelcontextprotocol":    {"cmd/pedigree/internal/gateway"},
	}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for dep, pkgs := range owners {
				if !strings.HasPrefix(p, dep) {
					continue
				}
				ok := false
				for _, pkg := range pkgs {
					if rel == pkg {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s imports %s, which only %v may import", path, p, pkgs)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d Go files; the walk did not see the tree", checked)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
}

// TestLayers fails when the code's calls stop running one way. Below the
// engine (the root package), internal/ holds its parts: none of them
// imports the root, the command, or the test support. Above it, testkit/
// is test support: only tests import it (a _test.go file, or testkit
// itself), never code that ships.
func TestLayers(t *testing.T) {
	const mod = "github.com/pedigree-ai/pedigree"
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		top, _, _ := strings.Cut(rel, "/")
		checked[top]++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case top == "internal" && (p == mod || strings.HasPrefix(p, mod+"/cmd/") || strings.HasPrefix(p, mod+"/testkit/")):
				t.Errorf("%s imports %s: the engine's parts under internal/ import nothing above the engine", path, p)
			case top != "testkit" && strings.HasPrefix(p, mod+"/testkit/"):
				t.Errorf("%s imports %s: only tests import the test support", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"internal", "testkit", "cmd", "."} {
		if checked[top] < 3 {
			t.Fatalf("checked %d files under %s: the walk did not see the tree (%v)", checked[top], top, checked)
		}
	}
}
