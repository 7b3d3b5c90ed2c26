package gate

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// An operator's extension that reads how a number is written (here: an
// amount must be plain digits, since the payment tool downstream reads
// "1e2" as 1) decides on the number's text, but the memo's key compares
// numbers by value (ast.Compare: 100 = 1e2 = 100.0, with one hash), so a
// call whose amount is spelt 1e2 gets the value the policy yielded for
// 100: an allow, where evaluating the policy denies. The arguments reach
// the input with their spelling (json.Decoder.UseNumber), and an injected
// instruction chooses it.
func TestRedTeamMemoKeyComparesNumbersByValue(t *testing.T) {
	dir := t.TempDir()
	ext := "package pedigree.ext\n\nimport rego.v1\n\n" +
		"deny contains \"the amount must be written as plain digits\" if {\n" +
		"\tnot regex.match(`^[0-9]+$`, json.marshal(input.action.args.amount))\n}\n"
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
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	distinct := 0
	for i, in := range memoCases(t) {
		for _, spelt := range []string{"1e2", "100.0", "1E+2"} {
			plain := set(in, ast.NumberTerm("100"), "action", "args", "amount")
			odd := set(in, ast.NewTerm(ast.Number(spelt)), "action", "args", "amount")
			if _, err := g.eval(t.Context(), plain, at); err != nil {
				t.Fatal(err)
			}
			got, err := g.eval(t.Context(), odd, at)
			if err != nil {
				t.Fatal(err)
			}
			want, err := g.evalMemo(t.Context(), odd, at, false)
			if err != nil {
				t.Fatal(err)
			}
			if wp, _ := g.evalMemo(t.Context(), plain, at, false); !reflect.DeepEqual(wp, want) {
				distinct++
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("case %d: amount %s after 100: the memo says %s %q, the policy evaluated says %s %q",
					i, spelt, got.Decision, got.Reasons, want.Decision, want.Reasons)
			}
		}
	}
	if distinct == 0 {
		t.Fatal("the extension never told 100 from its other spellings: the test tests nothing")
	}
}
