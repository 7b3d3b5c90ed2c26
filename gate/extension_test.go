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
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
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

// TestRewriteWouldWeakenTheDefault shows what the refusal prevents: a module
// in package pedigree adds clauses to the default policy's own rules. The
// default is written so that its sets only add reasons to deny, and a second
// value for any of its complete rules is a conflict (an error, so a deny):
// `gate.excused(_) := true` no longer names a rule, and no added clause we
// tried reaches an allow. One still weakens it: an extra name in protected_args
// turns a tainted call with no protected argument from a deny into an ask.
func TestRewriteWouldWeakenTheDefault(t *testing.T) {
	p, err := gate.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	p.Modules["excuse.rego"] = ast.MustParseModuleWithOpts("package pedigree\nimport rego.v1\ngate.protected_args contains \"nothing\"\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
	call := func(w *enginetest.World) *gate.Decision {
		_, _, memory := laundered(w)
		return w.Check("agent:planner", pedigree.Call{Session: "s1", Tool: "send_money", Args: []byte(`{"subject":"x"}`),
			Justification: []string{memory.ID}, ArgSources: map[string][]string{"subject": {memory.ID}}})
	}
	if d := call(world(t)); d.Decision != gate.Deny {
		t.Fatalf("the default policy: %s %v, want deny", d.Decision, d.Reasons)
	}
	if d := call(world(t, pedigree.WithPolicy(p))); d.Decision != gate.Ask {
		t.Fatalf("the rewrite did not weaken the decision (%s %v): this test no longer shows the attack", d.Decision, d.Reasons)
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

// TestLeanOnlyForTheDefault: the default policy, and it alone, is given the
// lean input (only the justification entries with an untrusted label); a
// policy with an operator's modules is given every entry.
func TestLeanOnlyForTheDefault(t *testing.T) {
	def, err := gate.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	ext, err := gate.PolicyFromDir(filepath.Join("..", "testdata", "policies", "extend"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []gate.Option
		lean bool
	}{
		{"no policy named", nil, true},
		{"the default", []gate.Option{gate.WithPolicy(def)}, true},
		{"an extension", []gate.Option{gate.WithPolicy(ext)}, false},
	} {
		g, err := gate.New(t.Context(), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if g.Lean() != c.lean {
			t.Errorf("%s: lean %v, want %v", c.name, g.Lean(), c.lean)
		}
	}
}
