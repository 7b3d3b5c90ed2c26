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
		"github.com/sigstore/sigstore":       {"registry", "internal/kmstest"}, // kmstest: the KMS fakes speak to sigstore's clients
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
