package gate_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/registry"
)

// TestExtensionCannotRewriteTheDefault: an extension may add deny and ask
// reasons in package pedigree.ext only. A module in package pedigree (with
// `gate.excused(_) := true`), in pedigree.gate or under it, or data under
// pedigree.gate, would add to the default policy's own rules: refused, with
// the way to replace the policy on purpose named.
func TestExtensionCannotRewriteTheDefault(t *testing.T) {
	for name, want := range map[string]string{
		"rewrite-root": "module excuse.rego is in package pedigree:",
		"rewrite-gate": "module excuse.rego is in package pedigree.gate:",
		"rewrite-sub":  "module sub.rego is in package pedigree.gate.helpers:",
		"rewrite-data": "its data sets pedigree.gate",
		"failopen":     "is in package pedigree.gate",
	} {
		_, err := gate.PolicyFromDir(filepath.Join("..", "testdata", "policies", name))
		if !errors.Is(err, gate.ErrPolicy) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want ErrPolicy with %q", name, err, want)
		}
		if err != nil && name != "rewrite-data" && !strings.Contains(err.Error(), "--replace-policy") {
			t.Errorf("%s: the error does not say how to replace the policy: %v", name, err)
		}
	}
	// A replacement must define the decision itself.
	for _, name := range []string{"rewrite-root", "rewrite-sub"} {
		if _, err := gate.ReplacementPolicyFromDir(filepath.Join("..", "testdata", "policies", name)); !errors.Is(err, gate.ErrPolicy) {
			t.Errorf("%s as a replacement: got %v", name, err)
		}
	}
	if _, err := gate.PolicyFromDir(filepath.Join("..", "testdata", "policies", "extend")); err != nil {
		t.Fatalf("a real extension: %v", err)
	}
}

// TestRewriteWouldAllow shows what the refusal prevents: the module of
// rewrite-root, added to the default policy, allows a laundered call.
func TestRewriteWouldAllow(t *testing.T) {
	p, err := gate.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	p.Modules["excuse.rego"] = ast.MustParseModuleWithOpts("package pedigree\nimport rego.v1\ngate.excused(_) := true\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
	w := world(t, pedigree.WithPolicy(p))
	prompt, _, memory := laundered(w)
	d := w.Check("agent:planner", pedigree.Call{Session: "s1", Tool: "send_money", Args: []byte(`{"recipient":"999-666","amount":5,"subject":"x"}`),
		Justification: []string{prompt.ID, memory.ID}, ArgSources: map[string][]string{"subject": {memory.ID}, "recipient": {prompt.ID}, "amount": {prompt.ID}}})
	if d.Decision != gate.Allow {
		t.Fatalf("the rewrite did not allow (%s %v): this test no longer shows the attack", d.Decision, d.Reasons)
	}
}

// TestFileReadingBuiltinRefused: an extension that reads a file through
// json.match_schema's $ref stops the engine from starting.
func TestFileReadingBuiltinRefused(t *testing.T) {
	p, err := gate.PolicyFromDir(filepath.Join("..", "testdata", "policies", "schema-file"))
	if err != nil {
		t.Fatal(err)
	}
	op, _, _ := registry.GenerateSigner(nil)
	e, err := pedigree.NewInMemory(context.Background(), 0.5, op, pedigree.WithPolicy(p))
	if e != nil {
		e.Close()
	}
	if !errors.Is(err, gate.ErrPolicy) || !strings.Contains(err.Error(), "undefined function json.match_schema") {
		t.Fatalf("got %v, want ErrPolicy naming json.match_schema", err)
	}
}
