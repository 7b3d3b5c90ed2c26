package gate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree/gate"
)

// decisionCase is one data-driven case of the default policy (OPA's style:
// note, input, want), in testdata/gate/*.yaml. The input is exactly what the
// gate logs with a decision.
type decisionCase struct {
	Note  string         `json:"note"`
	Input map[string]any `json:"input"`
	Want  struct {
		Decision       gate.Outcome `json:"decision"`
		ReasonContains string       `json:"reason_contains"`
	} `json:"want"`
}

func TestDecisionCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "gate", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the cases of testdata/gate, found %d (%v)", len(files), err)
	}
	g, err := gate.New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c decisionCase
			if err := yaml.UnmarshalStrict(b, &c); err != nil {
				t.Fatal(err)
			}
			if c.Note == "" || c.Input == nil || c.Want.Decision == "" {
				t.Fatal("a case needs note, input and want.decision")
			}
			in, err := yaml.Marshal(c.Input)
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(in)
			if err != nil {
				t.Fatal(err)
			}
			got, reasons, err := g.Reevaluate(t.Context(), js, at)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Want.Decision {
				t.Fatalf("%s: got %s %v, want %s", c.Note, got, reasons, c.Want.Decision)
			}
			if w := c.Want.ReasonContains; w != "" && !strings.Contains(strings.Join(reasons, "\n"), w) {
				t.Fatalf("%s: reasons %v do not say %q", c.Note, reasons, w)
			}
		})
	}
}
