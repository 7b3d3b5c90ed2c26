package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGateReevaluate(t *testing.T) { modes(t, testGateReevaluate) }

func testGateReevaluate(t *testing.T, served bool) {
	c := newEnv(t)
	c.bootstrap()
	if served {
		c.serve()
	}
	prompt := c.rec("user:alice", "--session", "s1", "--kind", "prompt", "--content", "pay 123")
	r := c.run("-o", "json", "gate", "check", "--as", "agent:planner", "--key", c.key("agent_planner"), "--session", "s1",
		"--tool", "send_money", "--args", `{"to":"123"}`, "--justification", prompt)
	if r.code != ExitOK {
		t.Fatalf("check: exit %d %s", r.code, r.err)
	}
	id := r.json(t)["decision_id"].(string)

	// The same input, the same policy: the same decision, exit 0.
	re := c.must("-o", "json", "gate", "reevaluate", id[:10]).json(t)
	if re["same"] != true || re["decision"] != "allow" || re["logged"] != "allow" || re["decision_id"] != id || re["version"] != float64(1) || len(re["changes"].([]any)) != 0 {
		t.Fatalf("reevaluate: %v", re)
	}
	if r := c.must("gate", "reevaluate", id); !strings.HasPrefix(r.out, "same: ALLOW") {
		t.Fatalf("text: %s", r.out)
	}
	if r := c.run("gate", "reevaluate", strings.Repeat("0", 12)); r.code != ExitError || !strings.Contains(r.err, "unknown decision") {
		t.Fatalf("unknown decision: exit %d %s", r.code, r.err)
	}

	// Another policy: exit 3, and it says the version and the decision changed.
	pol := filepath.Join(c.tmp, "pol")
	os.Mkdir(pol, 0o755)
	os.WriteFile(filepath.Join(pol, "ext.rego"), []byte("package pedigree.ext\n\nimport rego.v1\n\ndeny contains \"no payments today\" if input.action.tool == \"send_money\"\n"), 0o644)
	r = c.run("-o", "json", "gate", "reevaluate", id, "--policies", pol)
	if served {
		if r.code != ExitUsage || !strings.Contains(r.err, "apply to 'pedigree serve'") {
			t.Fatalf("--policies through a server: exit %d %s", r.code, r.err)
		}
		return
	}
	if r.code != ExitNegative {
		t.Fatalf("another policy: exit %d %s%s", r.code, r.out, r.err)
	}
	re = r.json(t)
	changes := strings.Join(toStrings(re["changes"]), "|")
	if re["same"] != false || re["decision"] != "deny" || !strings.Contains(changes, "policy version: logged") || !strings.Contains(changes, "decision: logged allow, now deny") {
		t.Fatalf("another policy: %v", re)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
