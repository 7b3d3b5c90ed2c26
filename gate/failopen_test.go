package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// TestFailOpenTrapIsReal shows that testdata/policies/failopen allows a
// call when evaluated the default way (without strict builtin errors): the
// gate's deny on the same input (TestFailClosed) is its doing, not the
// policy's.
func TestFailOpenTrapIsReal(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "testdata", "policies", "failopen", "gate.rego"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := rego.New(rego.Query(decisionQuery), rego.Module("gate.rego", string(src)), rego.SetRegoVersion(ast.RegoV1)).PrepareForEval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := q.Eval(t.Context(), rego.EvalInput(map[string]any{"action": map[string]any{"args": map[string]any{"amount": "lots"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Expressions[0].Value.(map[string]any)["decision"]; got != "allow" {
		t.Fatalf("without strict builtin errors the policy yields %v; the trap this test documents is gone", got)
	}
}

func TestCapabilitiesLeaveOutTheNetwork(t *testing.T) {
	for _, b := range capabilities().Builtins {
		if b.Name == "http.send" || strings.HasPrefix(b.Name, "net.") || b.Name == "opa.runtime" {
			t.Errorf("builtin %s is available to policies", b.Name)
		}
	}
	_, err := ReplacementPolicyFromDir(filepath.Join("..", "testdata", "policies", "network"))
	if err != nil {
		t.Fatal(err) // it loads; it must fail to compile in New
	}
}

// TestTimeoutMustBePositive: a zero or negative evaluation timeout would
// deny every call as timed out; the gate refuses to start with one.
func TestTimeoutMustBePositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if g, err := New(t.Context(), WithTimeout(d)); g != nil || err == nil || !strings.Contains(err.Error(), "timeout must be positive") {
			t.Errorf("timeout %s: %v, want the timeout refused", d, err)
		}
	}
	if _, err := New(t.Context(), WithTimeout(time.Minute)); err != nil {
		t.Fatalf("a positive timeout: %v", err)
	}
}
