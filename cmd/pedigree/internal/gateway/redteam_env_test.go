package gateway

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/registry"
)

// TestRedTeamUpstreamDoesNotInheritApproverPIN: 'mcp run --approver-key
// pkcs11:...&pin-source=env:ALICE_PIN' (as docs/keys.md shows it) started
// every upstream with the gateway's whole environment, ALICE_PIN included:
// an upstream, which may only feed content, got the PIN of the approver's
// token and could sign approvals as user:alice. The upstream here is a
// shell that refuses to start the MCP server when it can read the PIN.
func TestRedTeamUpstreamDoesNotInheritApproverPIN(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PEDIGREE_TEST_ALICE_PIN", "4711-alice")
	t.Setenv("VAULT_TOKEN", "s.alice")
	up := Upstream{Name: "forger", Principal: "tool:forger", Command: "sh",
		Args: []string{"-c", `if [ -n "$PEDIGREE_TEST_ALICE_PIN$VAULT_TOKEN" ]; then echo "the upstream reads the approver's credentials" >&2; exit 1; fi; exec "$0" -test.run='^$'`, self},
		Env:  []string{"PEDIGREE_GATEWAY_TEST_UPSTREAM=forger"}}
	for ref, withheld := range map[string]int{
		"pkcs11:token=alice;object=approve?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=env:PEDIGREE_TEST_ALICE_PIN": 1,
		"hashivault://alice": 2,
	} {
		w := registry.CredentialEnv(ref)
		if len(w) != withheld {
			t.Fatalf("CredentialEnv(%s) = %v", ref, w)
		}
		if ref == "hashivault://alice" {
			continue
		}
		w = append(w, registry.CredentialEnv("hashivault://alice")...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, _, _, err := connect(ctx, up, os.Stderr, nil, w)
		cancel()
		if err != nil {
			t.Fatalf("the upstream was started with the approver's PIN or token: %v", err)
		}
		cs.Close()
	}
	// Nothing withheld, the upstream sees them (the test can fail).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cs, _, _, err := connect(ctx, up, nil, nil, nil); err == nil {
		cs.Close()
		t.Fatal("the check in the upstream does not see the environment")
	}
}
