package store_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	eachImport(t, 50, func(path, rel, p string) {
		for dep, pkgs := range owners {
			if strings.HasPrefix(p, dep) && !slices.Contains(pkgs, rel) {
				t.Errorf("%s imports %s, which only %v may import", path, p, pkgs)
			}
		}
	})
}

// TestLayers fails when the code's calls stop running one way. Below the
// engine (the root package), internal/ holds its parts: none of them
// imports the root, the command, or the test support. Above it, testkit/
// is test support: only tests import it (a _test.go file, or testkit
// itself), never code that ships.
func TestLayers(t *testing.T) {
	const mod = "github.com/pedigree-ai/pedigree"
	checked := map[string]int{}
	eachImport(t, 50, func(path, rel, p string) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		top, _, _ := strings.Cut(rel, "/")
		checked[top]++
		switch {
		case top == "internal" && (p == mod || strings.HasPrefix(p, mod+"/cmd/") || strings.HasPrefix(p, mod+"/testkit/")):
			t.Errorf("%s imports %s: the engine's parts under internal/ import nothing above the engine", path, p)
		case top != "testkit" && strings.HasPrefix(p, mod+"/testkit/"):
			t.Errorf("%s imports %s: only tests import the test support", path, p)
		}
	})
	for _, top := range []string{"internal", "testkit", "cmd", "."} {
		if checked[top] < 3 {
			t.Fatalf("saw %d imports of code that ships under %s: the walk did not see the tree (%v)", checked[top], top, checked)
		}
	}
}

// eachImport calls fn with every Go file of the module (testdata,
// node_modules and dot folders aside), its folder relative to the module's
// root, and each path it imports; it fails the test when fewer than min
// files were seen (a walk that did not see the tree).
func eachImport(t *testing.T, min int, fn func(path, rel, imp string)) {
	t.Helper()
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
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
			fn(path, rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < min {
		t.Fatalf("checked %d Go files; the walk did not see the tree", checked)
	}
}
