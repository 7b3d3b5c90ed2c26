package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// TestVerbsTable: every verb declared in the package is in verbs, once, and
// no two serve the same pattern (the mux would panic at New; a verb left out
// of verbs would be neither served nor listed, and its client method would
// fail with "no such endpoint").
func TestVerbsTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.CompositeLit); ok {
						if id, ok := lit.Type.(*ast.Ident); ok && id.Name == "verb" {
							declared = append(declared, vs.Names[i].Name)
						}
					}
				}
			}
		}
	}
	if len(declared) != len(verbs) {
		t.Errorf("%d verbs declared (%v), %d in verbs", len(declared), declared, len(verbs))
	}
	seen := map[string]bool{}
	for _, v := range verbs {
		if seen[v.pattern] {
			t.Errorf("two verbs serve %s", v.pattern)
		}
		seen[v.pattern] = true
	}
	if len(declared) < 20 {
		t.Fatalf("the walk found %d verbs: it no longer reads the declarations", len(declared))
	}
}

func TestVerbAt(t *testing.T) {
	v := &verb{method: "GET", pattern: "/v1/decisions/{id}/subject"}
	for arg, want := range map[string]string{"a/b c": "/v1/decisions/a%2Fb%20c/subject", ".": "/v1/decisions/%2E/subject", "..": "/v1/decisions/%2E%2E/subject"} {
		if got := v.at(arg).path; got != want {
			t.Errorf("at(%q): %s, want %s", arg, got, want)
		}
	}
	if got := getDecisions.at().with(map[string][]string{"limit": {"3"}, "session": {"s&t"}}).path; got != "/v1/decisions?limit=3&session=s%26t" {
		t.Errorf("with: %s", got)
	}
	for _, args := range [][]string{nil, {"a", "b"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("at(%q) on %s did not panic", args, v)
				}
			}()
			v.at(args...)
		}()
	}
}

// TestMissing: a server that lists more routes than this build calls is
// used; one that lacks any is not, and the missing routes are named.
func TestMissing(t *testing.T) {
	all := make([]string, 0, len(verbs))
	for _, v := range verbs {
		all = append(all, v.String())
	}
	if m := missing(append(slices.Clone(all), "GET /v1/newer")); len(m) != 0 {
		t.Errorf("a newer server with one more route: missing %v", m)
	}
	if m := missing(all[1:]); !slices.Equal(m, all[:1]) {
		t.Errorf("a server without %s: missing %v", all[0], m)
	}
	if m := missing(nil); len(m) != len(verbs) {
		t.Errorf("a server that lists nothing: missing %d of %d", len(m), len(verbs))
	}
}
