package gate

import (
	"context"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// TestBuiltinsAllClassified: every builtin of this OPA is either on the
// allowlist or left out with a reason, never both; a newer OPA's builtin
// fails this test until someone decides.
func TestBuiltinsAllClassified(t *testing.T) {
	have := map[string]bool{}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		have[b.Name] = true
		_, out := impure(b.Name)
		if out == pureBuiltins[b.Name] {
			t.Errorf("builtin %s: allowed %v, left out %v: decide", b.Name, pureBuiltins[b.Name], out)
		}
	}
	for n := range pureBuiltins {
		if !have[n] {
			t.Errorf("allowed builtin %s is not in this OPA", n)
		}
	}
	for _, b := range capabilities().Builtins {
		if !pureBuiltins[b.Name] {
			t.Errorf("capabilities offer %s", b.Name)
		}
	}
}

// compileCall prepares a policy whose decision calls name with caps.
func compileCall(caps *ast.Capabilities, name string) error {
	src := "package pedigree.gate\nimport rego.v1\ndecision := {\"decision\": \"allow\", \"reasons\": [sprintf(\"%v\", [x])]} if { x := " + name + "(\"a\") }\n"
	_, err := rego.New(rego.Query(decisionQuery), rego.Module("p.rego", src), rego.Capabilities(caps),
		rego.SetRegoVersion(ast.RegoV1), rego.StrictBuiltinErrors(true)).PrepareForEval(context.Background())
	return err
}

// TestImpureBuiltinsDoNotCompile: a policy that calls a builtin left out of
// the capabilities does not compile (so the gate does not start), one test
// per builtin; with OPA's own capabilities the same policy gets past the
// function's name, so each case can fail.
func TestImpureBuiltinsDoNotCompile(t *testing.T) {
	n := 0
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		reason, out := impure(b.Name)
		if !out {
			continue
		}
		n++
		t.Run(b.Name, func(t *testing.T) {
			err := compileCall(capabilities(), b.Name)
			if err == nil || !strings.Contains(err.Error(), "undefined function "+b.Name) {
				t.Fatalf("%s (%s): got %v, want undefined function", b.Name, reason, err)
			}
			if err := compileCall(ast.CapabilitiesForThisVersion(), b.Name); err != nil && strings.Contains(err.Error(), "undefined function") {
				t.Fatalf("%s is undefined even with OPA's capabilities: %v", b.Name, err)
			}
		})
	}
	if n < 40 {
		t.Fatalf("only %d builtins left out", n)
	}
	if err := compileCall(capabilities(), "upper"); err != nil {
		t.Fatalf("an allowed builtin: %v", err)
	}
}
