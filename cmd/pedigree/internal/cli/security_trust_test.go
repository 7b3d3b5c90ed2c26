package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// init writes the operator key to the keys directory, never the data
// directory; verify pins its public half by default and says so; the
// item-12 attack (registry rebuilt with another operator key) is refused
// against that root, and without one verify warns that none is pinned.
func TestInitKeyAndTrustRoot(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	if out, _ := exec.Command("find", c.dir, "-name", "*.key").Output(); len(out) > 0 {
		t.Fatalf("a key in the data directory: %s", out)
	}
	if fi, err := os.Stat(filepath.Dir(c.operatorKey())); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("keys directory: %v %v", fi, err)
	}
	v := c.must("-o", "json", "verify").json(t)
	if v["trust_root"] != "pinned key" {
		t.Fatalf("verify: %v", v)
	}
	// A registration after freeze is refused, logged, and writes no key.
	if r := c.run("registry", "add", "user:eve", "--tier", "user", "--new-key", c.key("eve")); r.code != ExitError {
		t.Fatalf("registration after freeze: exit %d", r.code)
	}
	if _, err := os.Stat(c.key("eve")); err == nil {
		t.Fatal("a key was written for a refused registration")
	}
	rs := c.must("-o", "json", "log", "refusals").json(t)["refusals"].([]any)
	if len(rs) != 1 || rs[0].(map[string]any)["kind"] != "frozen" || rs[0].(map[string]any)["principal"] != "user:eve" {
		t.Fatalf("refusals: %v", rs)
	}
	// Another keys directory: nothing pinned, and verify says so.
	c.env = map[string]string{"PEDIGREE_KEYS": filepath.Join(c.tmp, "elsewhere")}
	if r := c.must("verify"); !strings.Contains(r.out, "no trust root is pinned") {
		t.Fatalf("verify without a root:\n%s", r.out)
	}
	c.env = nil
	os.Remove(c.operatorKey())
	(&enginetest.World{T: t, Dir: c.dir}).RebuildRegistry()
	if r := c.run("verify"); r.code != ExitError || !strings.Contains(r.err, "trust root") {
		t.Fatalf("rebuilt registry against the pinned root: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := c.run("--trust-root", filepath.Join(c.tmp, "missing.pub"), "verify"); r.code != ExitError {
		t.Fatalf("a named root that cannot be read: exit %d", r.code)
	}
	c.env = map[string]string{"PEDIGREE_KEYS": filepath.Join(c.tmp, "elsewhere")}
	if r := c.must("-o", "json", "verify").json(t); r["trust_root"] != "none" {
		t.Fatalf("verify of the rebuilt store without a root: %v", r)
	}
}

func TestTrustRootDigestFlag(t *testing.T) {
	c := newEnv(t)
	c.must("init")
	c.must("registry", "add", "user:alice", "--tier", "user", "--approver", "--new-key", c.key("user_alice"))
	d := c.must("-o", "json", "registry", "freeze").json(t)["freeze_digest"].(string)
	f := filepath.Join(c.tmp, "digest")
	os.WriteFile(f, []byte(d+"\n"), 0o644)
	if v := c.must("--trust-root", f, "-o", "json", "verify").json(t); v["trust_root"] != "pinned digest" {
		t.Fatalf("%v", v)
	}
	os.WriteFile(f, []byte(strings.Repeat("0", 64)), 0o644)
	c.env = map[string]string{"PEDIGREE_TRUST_ROOT": f}
	if r := c.run("verify"); r.code != ExitError || !strings.Contains(r.err, "trust root") {
		t.Fatalf("wrong digest: exit %d %s", r.code, r.err)
	}
}

func TestApprovalRulesCLI(t *testing.T) { modes(t, testApprovalRulesCLI) }

func testApprovalRulesCLI(t *testing.T, served bool) {
	c := newEnv(t)
	c.bootstrap()
	if r := c.run("registry", "add", "tool:x", "--tier", "external", "--approver", "--new-key", c.key("x")); r.code != ExitUsage {
		t.Fatalf("--approver on an external tool: exit %d", r.code)
	}
	if served {
		c.serve()
	}
	c.rec("tool:gmail_read", "--session", "s1", "--kind", "tool_output", "--content", "pay 999")
	check := func() result {
		return c.run("-o", "json", "gate", "check", "--as", "agent:planner", "--key", c.key("agent_planner"), "--session", "s1", "--tool", "send_money", "--args", `{"to":"999"}`)
	}
	id := check().json(t)["decision_id"].(string)
	approve := func(ttl string) result {
		return c.run("gate", "approve", id, "--as", "user:alice", "--key", c.key("user_alice"), "--ttl", ttl)
	}
	if r := approve("100000h"); r.code != ExitError || !strings.Contains(r.err, "cap") {
		t.Fatalf("--ttl 100000h: exit %d %s", r.code, r.err)
	}
	c.must("gate", "approve", id, "--as", "user:alice", "--key", c.key("user_alice"))
	if r := approve("10m"); r.code != ExitError || !strings.Contains(r.err, "one approval") {
		t.Fatalf("second approval: exit %d %s", r.code, r.err)
	}
	if r := check(); r.code != ExitOK {
		t.Fatalf("approved call: exit %d", r.code)
	}
	// The refused approval is in the refusal log.
	rs := c.must("-o", "json", "log", "refusals").json(t)["refusals"].([]any)
	if len(rs) == 0 || rs[len(rs)-1].(map[string]any)["kind"] != "approval" {
		t.Fatalf("refusals: %v", rs)
	}
}

// A checkpoint kept elsewhere: verify --checkpoint and log prove/consistency
// --checkpoint-file pass on the store, and fail with exit 3 on an old copy.
func TestCheckpointFileCLI(t *testing.T) { modes(t, testCheckpointFileCLI) }

func testCheckpointFileCLI(t *testing.T, served bool) {
	c := newEnv(t)
	c.bootstrap()
	first := c.rec("user:alice", "--session", "s", "--content", "one")
	old := filepath.Join(c.tmp, "old")
	if out, err := exec.Command("cp", "-a", c.dir, old).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	c.rec("user:alice", "--session", "s", "--content", "two")
	if served {
		c.serve()
	}
	cpFile := filepath.Join(c.tmp, "checkpoint.json")
	os.WriteFile(cpFile, []byte(c.must("-o", "json", "log", "checkpoint").out), 0o644)
	c.must("verify", "--checkpoint", cpFile)
	c.must("log", "prove", first[:12], "--checkpoint-file", cpFile)
	c.rec("user:alice", "--session", "s", "--content", "three")
	c.must("log", "consistency", "--checkpoint-file", cpFile)
	// The old copy, opened with the same keys directory entry.
	o := &cliEnv{t: t, dir: old, tmp: c.tmp, now: c.now}
	o.env = map[string]string{"PEDIGREE_TRUST_ROOT": filepath.Join(filepath.Dir(c.operatorKey()), strings.TrimSuffix(filepath.Base(c.operatorKey()), ".key")+".pub")}
	if r := o.run("-o", "json", "verify", "--checkpoint", cpFile); r.code != ExitNegative || !strings.Contains(r.out, "behind") {
		t.Fatalf("old copy: exit %d %s %s", r.code, r.out, r.err)
	}
	if r := o.run("log", "prove", first[:12], "--checkpoint-file", cpFile); r.code != ExitNegative {
		t.Fatalf("prove on the old copy: exit %d %s", r.code, r.err)
	}
	if r := o.run("log", "consistency", "--checkpoint-file", cpFile); r.code != ExitNegative {
		t.Fatalf("consistency on the old copy: exit %d %s", r.code, r.err)
	}
}

// A running server is held to the root the command pins: the same root
// passes, another is refused, through the socket as at open.
func TestServedTrustRoot(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	c.serve()
	if v := c.must("-o", "json", "verify").json(t); v["trust_root"] != "pinned key" {
		t.Fatalf("served verify: %v", v)
	}
	other := newEnv(t)
	other.must("init")
	otherPub := strings.TrimSuffix(other.operatorKey(), ".key") + ".pub"
	if r := c.run("--trust-root", otherPub, "verify"); r.code == ExitOK || !strings.Contains(r.err, "trust root") {
		t.Fatalf("a server against another root: exit %d %s", r.code, r.err)
	}
}

// TestApprovalAuthorityDefaults: a person (user:NAME at the user tier) holds
// approval authority unless --approver=false withholds it; a tool registered
// at the user tier holds none unless --approver gives it.
func TestApprovalAuthorityDefaults(t *testing.T) {
	c := newEnv(t)
	c.must("init")
	for _, args := range [][]string{
		{"user:bob", "--tier", "user"},
		{"user:carol", "--tier", "user", "--approver=false"},
		{"tool:usertool", "--tier", "user"},
	} {
		c.must(append([]string{"registry", "add", args[0], "--new-key", c.key(strings.ReplaceAll(args[0], ":", "_"))}, args[1:]...)...)
	}
	list := c.must("-o", "json", "registry", "list").json(t)
	got := map[string]bool{}
	for _, p := range list["principals"].([]any) {
		m := p.(map[string]any)
		got[m["id"].(string)], _ = m["approver"].(bool)
	}
	if !got["user:bob"] || got["user:carol"] || got["tool:usertool"] {
		t.Fatalf("approval authority %v: want user:bob only", got)
	}
}
