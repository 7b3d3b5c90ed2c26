package gate

import (
	"strings"
	"testing"
)

// TestParseVerdictFailsClosed: every decision object that is not exactly
// the documented shape is an error, which the gate turns into a deny.
func TestParseVerdictFailsClosed(t *testing.T) {
	for name, c := range map[string]struct {
		v    any
		want string
	}{
		"not an object":       {"allow", "not an object"},
		"undefined":           {nil, "not an object"},
		"unknown field":       {map[string]any{"decision": "allow", "reasons": []any{}, "allow": true}, `unknown field "allow"`},
		"decision not string": {map[string]any{"decision": true, "reasons": []any{}}, "decision is a bool"},
		"reasons not array":   {map[string]any{"decision": "allow", "reasons": "ok"}, "reasons is a string"},
		"reason not string":   {map[string]any{"decision": "allow", "reasons": []any{1.0}}, "reasons[0] is a float64"},
		"warnings not array":  {map[string]any{"decision": "allow", "reasons": []any{}, "warnings": map[string]any{}}, "warnings is a map"},
		"approval not string": {map[string]any{"decision": "allow", "reasons": []any{}, "approval": []any{}}, "approval is a []interface"},
	} {
		if _, err := parseVerdict(c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
	got, err := parseVerdict(map[string]any{"decision": "deny", "reasons": []any{"r"}, "warnings": nil, "approval": "a"})
	if err != nil || got.Decision != "deny" || len(got.Reasons) != 1 || got.Reasons[0] != "r" || got.Warnings != nil || got.Approval != "a" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
