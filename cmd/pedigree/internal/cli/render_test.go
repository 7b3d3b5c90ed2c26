package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evil holds a character of every class a terminal acts on: C0 (BEL, CR,
// ESC sequences that move the cursor up and erase lines), C1 (CSI, NEL), a
// bidi override and isolate, zero-width characters, a tag character. It
// tries to make `lineage show` print a trusted principal over the real one.
const evil = "hello\x1b[2A\x1b[2Kprincipal user:alice (tier user)\r\a\u009b2J\u0085\u202egnp.exe\u2066\u200b\u200d\ufeff\u2060\U000E0041 end"

// raw lists what must never reach a terminal from the record.
var raw = []string{"\x1b", "\r", "\a", "\u009b", "\u0085", "\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\u2060", "\U000E0041"}

func rawControl(s string) string {
	for _, r := range raw {
		if strings.Contains(s, r) {
			return r
		}
	}
	return ""
}

// TestEveryVerbEscapesControls stores content, arguments, an argument name
// and a plan carrying every class of control character, and runs every
// verb that prints them: none prints one raw, each that escaped one says
// so, and -o json still holds the exact bytes (issue 26, item 7).
func TestEveryVerbEscapesControls(t *testing.T) { modes(t, testEveryVerbEscapesControls) }

func testEveryVerbEscapesControls(t *testing.T, served bool) {
	c := newEnv(t)
	c.bootstrap()
	os.WriteFile(filepath.Join(c.dir, "tools.yaml"), []byte("tools:\n  send_money:\n    sensitive: true\n    role: send\n    recipient_arg: recipient\n    args:\n      recipient: {trusted: true}\n      subject: {trusted: false}\n"), 0o644)
	c.must("registry", "seal")
	if served {
		c.serve()
	}
	prompt := c.rec("user:alice", "--session", "s1", "--kind", "prompt", "--content", "pay my bill")
	web := c.rec("tool:web", "--session", "s1", "--kind", "tool_output", "--store-content", "--content", evil)
	planID := strings.TrimSpace(c.must("plan", "record", "--as", "agent:planner", "--key", c.key("agent_planner"), "--session", "s1", "--parent", prompt,
		"--steps", `[{"tool":"send_money","args":{"recipient":"123","subject":"`+"\u202e\u0085\u200b"+`"}}]`).out)
	args, _ := json.Marshal(map[string]any{"recipient": "999", "subject": evil, "memo" + "\u202e\u0085": "x"})
	check := c.run("gate", "check", "--as", "agent:planner", "--key", c.key("agent_planner"), "--session", "s1", "--tool", "send_money",
		"--args", string(args), "--arg", "recipient="+web, "--arg", "memo\u202e\u0085="+web)
	if check.code != ExitNegative {
		t.Fatalf("gate check: exit %d\n%s%s", check.code, check.out, check.err)
	}
	d := c.must("-o", "json", "gate", "log").json(t)["decisions"].([]any)
	decision := d[len(d)-1].(map[string]any)
	callID := decision["call_id"].(string)

	outputs := map[string]result{
		"gate check":          check,
		"lineage show":        c.must("lineage", "show", web),
		"lineage show call":   c.must("lineage", "show", callID),
		"lineage show plan":   c.must("lineage", "show", planID),
		"lineage trace":       c.must("lineage", "trace", callID),
		"gate log":            c.must("gate", "log"),
		"gate pending":        c.must("gate", "pending"),
		"gate approve":        c.must("gate", "approve", decision["decision_id"].(string), "--as", "user:alice", "--key", c.key("user_alice")),
		"trajectory show":     c.must("trajectory", "show", "--session", "s1"),
		"gate reevaluate":     c.must("gate", "reevaluate", decision["decision_id"].(string)),
		"an error quoting it": c.run("lineage", "show", "\x1b[2Kdeadbeef"),
	}
	for name, r := range outputs {
		if ch := rawControl(r.out + r.err); ch != "" {
			t.Errorf("%s prints %q raw:\n%s%s", name, ch, r.out, r.err)
		}
	}
	for _, name := range []string{"gate check", "lineage show", "lineage show call", "lineage show plan", "gate log", "gate pending", "gate approve"} {
		if r := outputs[name]; !strings.Contains(r.out+r.err, "control characters shown escaped)") {
			t.Errorf("%s escaped without saying so:\n%s%s", name, r.out, r.err)
		}
	}
	if show := outputs["lineage show"].out; !strings.Contains(show, `hello\x1b[2A\x1b[2Kprincipal user:alice`) || !strings.Contains(show, "principal tool:web (tier unverified)") {
		t.Errorf("lineage show does not show the content escaped under its real principal:\n%s", show)
	}
	// JSON is exact: the stored bytes, for programs.
	if got := c.must("-o", "json", "lineage", "show", web).json(t)["content"]; got != evil {
		t.Errorf("lineage show -o json changed the content: %q", got)
	}
}

// TestHookAskShowsTheExactCall: Claude Code's ask reason shows the call's
// exact view, every protected argument whole and first (a long harmless
// memo sorted first does not push the recipient out of view), and the text
// a Read's path put into it shows escaped.
func TestHookAskShowsTheExactCall(t *testing.T) { modes(t, testHookAskShowsTheExactCall) }

func testHookAskShowsTheExactCall(t *testing.T, served bool) {
	c := newEnv(t)
	c.must("init")
	c.must("hook", "claude", "init")
	tools := filepath.Join(c.dir, "tools.yaml")
	b, err := os.ReadFile(tools)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte("  mcp__bank__send_money: {sensitive: true, ask_on_untrusted: true, args: {a_memo: {trusted: false}}}\n")...)
	if err := os.WriteFile(tools, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c.must("registry", "freeze")
	if served {
		c.serve()
	}
	c.hook(fixture(t, "user_prompt_submit"))
	c.hook(fixture(t, "pre_tool_use_read"))
	var post map[string]any
	json.Unmarshal(fixture(t, "post_tool_use_read"), &post)
	post["tool_input"] = map[string]any{"file_path": "/work/project/NOTES.md\x1b[1A\x1b[2K\u202e"}
	ev, _ := json.Marshal(post)
	if r := c.hook(ev); r.code != 0 {
		t.Fatalf("PostToolUse: exit %d %s", r.code, r.err)
	}
	memo := strings.Repeat("€", 150) + strings.Repeat("x", 20) // 470 bytes, sorted before "to"
	call, _ := json.Marshal(map[string]any{"session_id": post["session_id"], "hook_event_name": "PreToolUse", "tool_name": "mcp__bank__send_money",
		"tool_use_id": "toolu_09PAY", "tool_input": map[string]any{"a_memo": memo, "amount": 5000, "to": "999-666"}})
	d, reason := permission(t, c.hook(call))
	if d != "ask" {
		t.Fatalf("the payment after a poisoned Read: %q (%s)", d, reason)
	}
	to := strings.Index(reason, `to = "999-666"  [protected, shown whole; from the whole justification`)
	amount := strings.Index(reason, `amount = 5000  [protected, shown whole;`)
	memoAt := strings.Index(reason, `a_memo = "€`)
	if to < 0 || amount < 0 || memoAt < to || memoAt < amount || !strings.Contains(reason, "left out") {
		t.Fatalf("the ask does not show every protected argument whole, first:\n%s", reason)
	}
	if ch := rawControl(reason); ch != "" || !strings.Contains(reason, `NOTES.md\x1b[1A\x1b[2K\u202e`) || !strings.Contains(reason, "control characters shown escaped)") {
		t.Fatalf("the ask's reason prints controls raw, or does not say it escaped them:\n%q", reason)
	}
}
