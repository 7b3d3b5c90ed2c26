package gate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"sigs.k8s.io/yaml"
)

// memoCases are the logged inputs of testdata/gate, as OPA values.
func memoCases(t *testing.T) []ast.Value {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "gate", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the cases of testdata/gate, found %d (%v)", len(files), err)
	}
	var out []ast.Value
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Input map[string]any `json:"input"`
		}
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		v, err := ast.InterfaceToValue(c.Input)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// set returns in with the value at path replaced by v.
func set(in ast.Value, v *ast.Term, path ...string) ast.Value {
	o := in.(ast.Object).Copy()
	if len(path) == 1 {
		o.Insert(ast.StringTerm(path[0]), v)
		return o
	}
	inner := o.Get(ast.StringTerm(path[0]))
	if inner == nil {
		inner = ast.ObjectTerm()
	}
	o.Insert(ast.StringTerm(path[0]), ast.NewTerm(set(inner.Value, v, path[1:]...)))
	return o
}

// The memo gives what evaluating gives, on every case and on every case
// with what the policy does not read changed (a hit) and with what it
// reads changed (a different key): decision, reasons, warnings, approval.
func TestMemoIsExact(t *testing.T) {
	g, err := New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g.memo == nil {
		t.Fatal("the default policy is not memoised")
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	hits := 0
	for i, in := range memoCases(t) {
		variants := []ast.Value{
			in,
			set(in, ast.StringTerm("another-call"), "action", "call_id"),
			set(in, ast.StringTerm("another-session"), "action", "session"),
			set(in, ast.NumberTerm("7"), "trajectory", "features", "length"),
			set(in, ast.StringTerm("external"), "action", "principal_tier"),
			set(in, ast.BooleanTerm(false), "tool", "sensitive"),
			set(in, ast.StringTerm("deny"), "tool", "on_steered"),
			set(in, ast.BooleanTerm(true), "tool", "ask_on_untrusted"),
		}
		for j, v := range variants {
			key, ok := g.memo.key(v)
			had := ok && g.memo.get(key) != nil
			got, err := g.eval(t.Context(), v, at)
			if err != nil {
				t.Fatal(err)
			}
			want, err := g.evalMemo(t.Context(), v, at, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d variant %d: memo %+v, evaluated %+v", i, j, got, want)
			}
			if had {
				hits++
			}
		}
	}
	if hits < 20 {
		t.Fatalf("%d memo hits: inputs differing in what the policy does not read should hit", hits)
	}
}

// An extension that reads more of the input is keyed by it: two inputs
// that differ only in the session it reads get their own decisions.
func TestMemoKeysWhatAnExtensionReads(t *testing.T) {
	dir := t.TempDir()
	ext := "package pedigree.ext\n\nimport rego.v1\n\ndeny contains \"session closed\" if input.action.session == \"closed\"\n"
	if err := os.WriteFile(filepath.Join(dir, "ext.rego"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := PolicyFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(t.Context(), WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.memo.String(), "input.action.session") {
		t.Fatalf("memo keyed by %s, not by the session the extension reads", g.memo)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, in := range memoCases(t) {
		open, closed := set(in, ast.StringTerm("open"), "action", "session"), set(in, ast.StringTerm("closed"), "action", "session")
		a, err := g.eval(t.Context(), open, at)
		if err != nil {
			t.Fatal(err)
		}
		b, err := g.eval(t.Context(), closed, at)
		if err != nil {
			t.Fatal(err)
		}
		wa, _ := g.evalMemo(t.Context(), open, at, false)
		wb, _ := g.evalMemo(t.Context(), closed, at, false)
		if !reflect.DeepEqual(a, wa) || !reflect.DeepEqual(b, wb) {
			t.Fatalf("memo %v / %v, evaluated %v / %v", a, b, wa, wb)
		}
	}
}

// A policy that reads the clock is not memoised; one that names the whole
// input is keyed by all of it.
func TestMemoRefusesTheClock(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		{`deny contains "late" if time.now_ns() > 0`, "not memoised"},
		{`deny contains "x" if count(input) > 100`, "input"},
	} {
		dir := t.TempDir()
		ext := "package pedigree.ext\n\nimport rego.v1\n\n" + c.rule + "\n"
		if err := os.WriteFile(filepath.Join(dir, "ext.rego"), []byte(ext), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := PolicyFromDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(t.Context(), WithPolicy(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := g.memo.String(); got != c.want {
			t.Fatalf("%s: memo %q, want %q", c.rule, got, c.want)
		}
	}
}
