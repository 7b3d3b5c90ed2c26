package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
)

// The command-line contract (docs/CLI.md): unknown verbs at every level,
// unknown flags, missing required flags and malformed flag values are usage
// errors (2), with a suggestion for a mistyped verb; what the store says
// about well-formed input is an operational error (1). One row per verb
// and class of flag value.
func TestExitCodeTable(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	alice, agent := c.key("user_alice"), c.key("agent_planner")
	p := c.rec("user:alice", "--session", "s1", "--kind", "prompt", "--content", "hi")
	rec := []string{"record", "--as", "user:alice", "--key", alice, "--session", "s1", "--content", "x"}
	check := []string{"gate", "check", "--as", "agent:planner", "--key", agent, "--session", "s1", "--tool", "t"}
	with := func(base []string, extra ...string) []string { return append(append([]string{}, base...), extra...) }
	cases := []struct {
		name    string
		args    []string
		want    int
		errText string
	}{
		// Unknown verbs, at every level: 2, with a suggestion.
		{"root", []string{"chek"}, ExitUsage, "unknown command"},
		{"gate chek", []string{"gate", "chek"}, ExitUsage, "Did you mean this?\n\tcheck"},
		{"registry frezze", []string{"registry", "frezze"}, ExitUsage, "freeze"},
		{"lineage trase", []string{"lineage", "trase"}, ExitUsage, "trace"},
		{"mcp rn", []string{"mcp", "rn"}, ExitUsage, "run"},
		{"hook cloude", []string{"hook", "cloude"}, ExitUsage, "claude"},
		{"hook claude inti", []string{"hook", "claude", "inti"}, ExitUsage, "init"},
		{"trajectory shwo", []string{"trajectory", "shwo"}, ExitUsage, "show"},
		{"log chekpoint", []string{"log", "chekpoint"}, ExitUsage, "checkpoint"},
		{"plan recrod", []string{"plan", "recrod"}, ExitUsage, "record"},
		{"claude instal", []string{"claude", "instal"}, ExitUsage, "install"},
		{"a group alone shows its help", []string{"gate"}, ExitOK, ""},
		// Unknown flags and bad --output.
		{"unknown flag", with(check, "--bogus"), ExitUsage, "unknown flag"},
		{"bad -o", []string{"-o", "yaml", "registry", "list"}, ExitUsage, "--output"},
		// Required flags.
		{"record without --session", with(rec[:5], "--content", "x"), ExitUsage, "--session"},
		{"gate check without --session", []string{"gate", "check", "--as", "agent:planner", "--key", agent, "--tool", "t"}, ExitUsage, "--session"},
		{"record without content", rec[:7], ExitUsage, "--content"},
		// Malformed flag values: 2.
		{"init --tau 5", []string{"--dir", filepath.Join(c.tmp, "new"), "init", "--tau", "5"}, ExitUsage, "tau"},
		{"init --tau 0", []string{"--dir", filepath.Join(c.tmp, "new"), "init", "--tau", "0"}, ExitUsage, "tau"},
		{"init --tau abc", []string{"--dir", filepath.Join(c.tmp, "new"), "init", "--tau", "abc"}, ExitUsage, "tau"},
		{"init --max-approval-ttl -1h", []string{"--dir", filepath.Join(c.tmp, "new"), "init", "--max-approval-ttl", "-1h"}, ExitUsage, "ttl"},
		{"registry add --tier trusted", []string{"registry", "add", "user:x", "--tier", "trusted", "--new-key", filepath.Join(c.tmp, "x.key")}, ExitUsage, "trusted"},
		{"record --kind rumour", with(rec, "--kind", "rumour"), ExitUsage, "rumour"},
		{"record --parent weight 1.5", with(rec, "--parent", p+"=1.5"), ExitUsage, "[0, 1]"},
		{"record --parent weight lots", with(rec, "--parent", p+"=lots"), ExitUsage, "not a number"},
		{"record --parent not an ID", with(rec, "--parent", "zz"), ExitUsage, "not an entry ID"},
		{"gate check --args {to:1}", with(check, "--args", "{to:1}"), ExitUsage, "--args"},
		{"gate check --args [1]", with(check, "--args", "[1]"), ExitUsage, "--args"},
		{"gate check --step -1", with(check, "--plan", p, "--step", "-1"), ExitUsage, "--step"},
		{"gate check --justification ,", with(check, "--justification", ","), ExitUsage, "justification"},
		{"gate log --limit -1", []string{"gate", "log", "--limit", "-1"}, ExitUsage, "--limit"},
		{"log refusals --limit -1", []string{"log", "refusals", "--limit", "-1"}, ExitUsage, "--limit"},
		{"lineage trace --format svg", []string{"lineage", "trace", p, "--format", "svg"}, ExitUsage, "svg"},
		{"lineage trace --max-depth -1", []string{"lineage", "trace", p, "--max-depth", "-1"}, ExitUsage, "--max-depth"},
		{"gate approve --ttl -1h", []string{"gate", "approve", p, "--as", "user:alice", "--key", alice, "--ttl", "-1h"}, ExitUsage, "--ttl"},
		{"mcp add --tier trusted", []string{"mcp", "add", "x", "--tier", "trusted", "--", "true"}, ExitUsage, "trusted"},
		{"mcp run --mode wild", []string{"mcp", "run", "--mode", "wild"}, ExitUsage, "--mode"},
		{"serve --addr 0.0.0.0:1", []string{"serve", "--addr", "0.0.0.0:1"}, ExitUsage, "loopback"},
		{"bench --entries -1", []string{"bench", "--entries", "-1", "--in-memory"}, ExitUsage, "--entries"},
		{"bench --writers 0", []string{"bench", "--writers", "0", "--in-memory"}, ExitUsage, "--writers"},
		{"trajectory generate --attack-share 2", []string{"trajectory", "generate", "--attack-share", "2"}, ExitUsage, "--attack-share"},
		{"trajectory generate --sessions -1", []string{"trajectory", "generate", "--sessions", "-1"}, ExitUsage, "--sessions"},
		{"replay --workers -1", []string{"replay", "x.jsonl", "--workers", "-1"}, ExitUsage, "--workers"},
		{"plan record --steps {bad", []string{"plan", "record", "--as", "agent:planner", "--key", agent, "--session", "s1", "--steps", "{bad", "--parent", p}, ExitUsage, "--steps"},
		{"--lock-wait -1s", []string{"--lock-wait", "-1s", "registry", "list"}, ExitUsage, "--lock-wait"},
		{"hook claude init --user bob", []string{"--dir", filepath.Join(c.tmp, "new"), "hook", "claude", "init", "--user", "bob"}, ExitUsage, "--user"},
		{"hook claude settings --http ftp://x", []string{"hook", "claude", "settings", "--http", "ftp://x"}, ExitUsage, "--http"},
		{"claude install --user bob", []string{"claude", "install", "--user", "bob", "--settings", filepath.Join(c.tmp, "s.json")}, ExitUsage, "--user"},
		{"claude install --project --settings", []string{"claude", "install", "--project", "--settings", "x.json"}, ExitUsage, "pick one"},
		{"serve --socket too long", []string{"serve", "--socket", "/tmp/" + strings.Repeat("x", 120) + "/s.sock"}, ExitUsage, "107"},
		{"serve --memory-limit lots", []string{"serve", "--memory-limit", "lots"}, ExitUsage, "--memory-limit"},
		{"serve --nats-replicas 0", []string{"serve", "--nats", "embedded", "--nats-replicas", "0"}, ExitUsage, "--nats-replicas"},
		{"serve --nats-cert without its key", []string{"serve", "--nats", "nats://127.0.0.1:1", "--nats-cert", "c.pem"}, ExitUsage, "--nats-key"},
		{"serve --nats embedded --nats-ca", []string{"serve", "--nats", "embedded", "--nats-ca", "ca.pem"}, ExitUsage, "--nats-ca"},
		{"bench --checks -1", []string{"bench", "--checks", "-1", "--in-memory"}, ExitUsage, "--checks"},
		{"gate approve --ttl 10y", []string{"gate", "approve", p, "--as", "user:alice", "--key", alice, "--ttl", "10y"}, ExitUsage, "--ttl"},
		{"mcp add with a bad name", []string{"mcp", "add", "Bad Name", "--", "true"}, ExitUsage, "upstream name"},
		{"mcp run --name with no command", []string{"mcp", "run", "--name", "x"}, ExitUsage, "--name"},
		{"mcp run with an argument before --", []string{"mcp", "run", "x"}, ExitUsage, "after --"},
		{"mcp import-memory without --as", []string{"mcp", "import-memory", "f.jsonl"}, ExitUsage, "--as"},
		{"log refusals --limit x", []string{"log", "refusals", "--limit", "x"}, ExitUsage, "--limit"},
		{"trajectory generate --seed -1", []string{"trajectory", "generate", "--seed", "-1"}, ExitUsage, "--seed"},
		{"plan record without --parent", []string{"plan", "record", "--as", "agent:planner", "--key", agent, "--session", "s1", "--steps", "[]"}, ExitUsage, "--parent"},
		// Missing and extra arguments.
		{"recall without --session", []string{"recall", p}, ExitUsage, "--session"},
		{"trajectory show without --session", []string{"trajectory", "show"}, ExitUsage, "--session"},
		{"gate reject without an ID", []string{"gate", "reject"}, ExitUsage, "argument"},
		{"gate reevaluate without an ID", []string{"gate", "reevaluate"}, ExitUsage, "argument"},
		{"lineage show without an ID", []string{"lineage", "show"}, ExitUsage, "argument"},
		{"log prove without an ID", []string{"log", "prove"}, ExitUsage, "argument"},
		{"log consistency with one", []string{"log", "consistency", "1"}, ExitUsage, "OLD NEW"},
		{"replay without a file", []string{"replay"}, ExitUsage, "argument"},
		{"gate pending extra", []string{"gate", "pending", "extra"}, ExitUsage, "unexpected argument"},
		{"verify extra", []string{"verify", "extra"}, ExitUsage, "unexpected argument"},
		{"registry list extra", []string{"registry", "list", "extra"}, ExitUsage, "unexpected argument"},
		{"mcp list extra", []string{"mcp", "list", "extra"}, ExitUsage, "unexpected argument"},
		{"demo extra", []string{"demo", "extra"}, ExitUsage, "unexpected argument"},
		{"claude uninstall extra", []string{"claude", "uninstall", "extra"}, ExitUsage, "unexpected argument"},
		// Well-formed input the store refuses: 1 (and a command that asks a
		// registry at every start is named first).
		{"mcp add of uvx warns", []string{"mcp", "add", "fetch", "--", "uvx", "mcp-server-fetch"}, ExitError, "warning: 'uvx mcp-server-fetch' resolves its package"},
		{"record as an unknown principal", []string{"record", "--as", "user:eve", "--key", alice, "--session", "s1", "--content", "x"}, ExitError, "unknown principal"},
		{"record with an unknown parent", with(rec, "--parent", strings.Repeat("ab", 32)), ExitError, "unknown entry"},
		{"lineage show of an unknown entry", []string{"lineage", "show", strings.Repeat("cd", 32)}, ExitError, "unknown entry"},
		{"registry add after freeze", []string{"registry", "add", "user:x", "--tier", "user", "--new-key", filepath.Join(c.tmp, "x.key")}, ExitError, "frozen"},
	}
	for _, tc := range cases {
		r := c.run(tc.args...)
		if r.code != tc.want || !strings.Contains(r.err, tc.errText) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want it to say %q)", tc.name, r.code, tc.want, r.err, tc.errText)
		}
	}
}

// A short wait for the directory (a server starting, another verb
// finishing) prints nothing; only a wait that lasts says so.
func TestShortLockWaitIsSilent(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	holder, err := pedigree.Open(t.Context(), c.dir)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		holder.Close()
	}()
	r := c.run("registry", "list")
	if r.code != 0 || strings.Contains(r.err, "waiting") {
		t.Fatalf("a 300 ms wait: exit %d, stderr %q", r.code, r.err)
	}
}

// Every error about a missing key says what finds it; init on a store
// says the store is there, not that a key file exists.
func TestMissingKeysSayWhatFindsThem(t *testing.T) {
	c := newEnv(t)
	c.must("init")
	c.env = map[string]string{"PEDIGREE_KEYS": filepath.Join(c.tmp, "elsewhere")}
	r := c.run("registry", "freeze")
	if r.code != ExitError || !strings.Contains(r.err, "PEDIGREE_KEYS") || !strings.Contains(r.err, "--operator-key") {
		t.Fatalf("freeze without the keys directory: exit %d %s", r.code, r.err)
	}
	if r := c.run("registry", "freeze", "--operator-key", filepath.Join(c.tmp, "nope.key")); r.code != ExitError || !strings.Contains(r.err, "--operator-key") {
		t.Fatalf("freeze --operator-key missing: exit %d %s", r.code, r.err)
	}
	c.env = nil
	if r := c.run("init"); r.code != ExitError || !strings.Contains(r.err, "already exists here") || strings.Contains(r.err, "file already exists") {
		t.Fatalf("init on a store: exit %d %s", r.code, r.err)
	}
	c.must("registry", "add", "user:alice", "--tier", "user", "--new-key", c.key("user_alice"))
	c.must("registry", "freeze")
	if r := c.run("record", "--as", "user:alice", "--key", c.key("nope"), "--session", "s", "--content", "x"); r.code != ExitError || !strings.Contains(r.err, "--key") {
		t.Fatalf("record with a missing --key: exit %d %s", r.code, r.err)
	}
}
