package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTrajectoryEvalStructureOnly(t *testing.T) {
	c := newEnv(t)
	tools := filepath.Join("..", "..", "..", "..", "testdata", "trajectory", "tools.yaml")
	withArgs := filepath.Join(c.tmp, "with-args.jsonl")
	gen := c.must("trajectory", "generate", "--sessions", "300", "--seed", "4")
	if err := os.WriteFile(withArgs, []byte(gen.out), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same sessions with every argument left out.
	var bare strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(gen.out), "\n") {
		var s map[string]any
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		calls, _ := s["calls"].([]any) // null for a session of no calls
		for _, call := range calls {
			delete(call.(map[string]any), "args")
		}
		b, _ := json.Marshal(s)
		bare.Write(append(b, '\n'))
	}
	noArgs := filepath.Join(c.tmp, "no-args.jsonl")
	if err := os.WriteFile(noArgs, []byte(bare.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(c.tmp, "model.json")
	c.must("trajectory", "train", withArgs, "--model", model, "--tools", tools)

	for _, tc := range []struct {
		name  string
		extra []string
		model string // the key of the model's figures
	}{
		{"cross-validated", nil, "model_cv"},
		{"given model", []string{"--model", model}, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := c.must(append([]string{"-o", "json", "trajectory", "eval", withArgs, "--tools", tools}, tc.extra...)...).json(t)
			for _, k := range []string{"version", "sessions", "attack", "benign", "auc", "alert_rate_attack", "alert_rate_benign", "rules", tc.model} {
				if _, ok := full[k]; !ok {
					t.Fatalf("no %q in %v", k, full)
				}
			}
			if full["sessions"] != 300.0 || full["arguments"] != true {
				t.Fatalf("sessions %v arguments %v", full["sessions"], full["arguments"])
			}
			so, ok := full["structure_only"].(map[string]any)
			if !ok || so["rules"] == nil || so[tc.model] == nil {
				t.Fatalf("structure_only %v", full["structure_only"])
			}
			// Structure only is the file with its arguments left out.
			stripped := c.must(append([]string{"-o", "json", "trajectory", "eval", noArgs, "--tools", tools}, tc.extra...)...).json(t)
			if stripped["arguments"] != false || stripped["structure_only"] != nil {
				t.Fatalf("a file without arguments: arguments %v structure_only %v", stripped["arguments"], stripped["structure_only"])
			}
			for _, k := range []string{"rules", tc.model} {
				if !reflect.DeepEqual(so[k], stripped[k]) {
					t.Fatalf("%s: structure only %v, the stripped file %v", k, so[k], stripped[k])
				}
			}
			// Arguments change what the rules see on these sessions.
			if reflect.DeepEqual(full["rules"], so["rules"]) {
				t.Fatalf("the rules saw the same with and without arguments: %v", full["rules"])
			}
			text := c.must(append([]string{"trajectory", "eval", withArgs, "--tools", tools}, tc.extra...)...).out
			if !strings.Contains(text, "structure only: rules") {
				t.Fatalf("text output:\n%s", text)
			}
		})
	}
	for _, verb := range []string{"train", "eval"} {
		if h := c.must("trajectory", verb, "--help").out; !strings.Contains(h, "demonstration") || !strings.Contains(h, "your own labelled sessions") {
			t.Errorf("trajectory %s --help does not say the generated model is a demonstration:\n%s", verb, h)
		}
	}
}
