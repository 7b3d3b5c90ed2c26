package hook_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
)

const userSettings = `{"permissions": {"allow": ["Bash(ls:*)"]},
 "model": "opus",
 "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}],
           "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}]}}`

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

var installed = hook.CommandSettings("'/usr/local/bin/pedigree' --dir '/home/a/.local/share/pedigree' hook claude")

// Merging keeps every key the person wrote, in their order, and their own
// hooks beside pedigree's; a second merge changes nothing, byte for byte;
// removing gives back what was there.
func TestMergeSettingsKeepsTheUsersAndUndoes(t *testing.T) {
	merged, changed, err := hook.MergeSettings([]byte(userSettings), installed)
	if err != nil || !changed {
		t.Fatalf("merge: %v changed %v", err, changed)
	}
	s := string(merged)
	if !(strings.Index(s, `"permissions"`) < strings.Index(s, `"model"`) && strings.Index(s, `"model"`) < strings.Index(s, `"hooks"`)) {
		t.Errorf("the user's keys lost their order:\n%s", s)
	}
	var doc struct {
		Permissions struct{ Allow []string }  `json:"permissions"`
		Hooks       map[string][]hook.Matcher `json:"hooks"`
	}
	if err := json.Unmarshal(merged, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Permissions.Allow) != 1 || len(doc.Hooks["Stop"]) != 1 || doc.Hooks["Stop"][0].Hooks[0].Command != "echo mine" {
		t.Errorf("the user's settings were not kept: %s", s)
	}
	pre := doc.Hooks["PreToolUse"]
	if len(pre) != 2 || pre[0].Hooks[0].Command != "lint.sh" || !hook.IsPedigreeCommand(pre[1].Hooks[0].Command) {
		t.Errorf("PreToolUse: %+v", pre)
	}
	for _, ev := range hook.Events {
		if len(doc.Hooks[ev]) == 0 {
			t.Errorf("no hook for %s", ev)
		}
	}
	again, changed, err := hook.MergeSettings(merged, installed)
	if err != nil || changed || string(again) != string(merged) {
		t.Fatalf("a second merge changed the file (changed %v, err %v)", changed, err)
	}
	// Another binary path: pedigree's hooks are replaced, not doubled.
	moved, changed, err := hook.MergeSettings(merged, hook.CommandSettings("'/opt/pedigree' --dir '/d' hook claude"))
	if err != nil || !changed || strings.Count(string(moved), "hook claude") != len(hook.Events) || strings.Contains(string(moved), "/usr/local/bin/pedigree") {
		t.Fatalf("re-merge with another command: %v\n%s", err, moved)
	}
	back, changed, err := hook.RemoveSettings(moved)
	if err != nil || !changed {
		t.Fatalf("remove: %v %v", err, changed)
	}
	if !jsonEqual(t, back, []byte(userSettings)) {
		t.Fatalf("remove did not give back the user's settings:\n%s", back)
	}
	if has, _ := hook.HasPedigreeHooks(back); has {
		t.Fatal("pedigree hooks left after remove")
	}
	same, changed, err := hook.RemoveSettings([]byte(userSettings))
	if err != nil || changed || string(same) != userSettings {
		t.Fatalf("removing from settings without pedigree's hooks changed them: %v %v", err, changed)
	}
}

// A file that does not exist yet gets just the hooks; removing them leaves
// an empty object, not an empty "hooks".
func TestMergeSettingsEmpty(t *testing.T) {
	merged, changed, err := hook.MergeSettings(nil, installed)
	if err != nil || !changed {
		t.Fatal(err)
	}
	back, _, err := hook.RemoveSettings(merged)
	if err != nil || !jsonEqual(t, back, []byte(`{}`)) {
		t.Fatalf("%v %s", err, back)
	}
}

// A hook of pedigree's that the person put into a group of their own is
// taken out of it; their hook in that group stays.
func TestRemoveSettingsSharedGroup(t *testing.T) {
	in := `{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"lint.sh"},{"type":"command","command":"pedigree --dir /d hook claude || exit 2","timeout":30}]}]}}`
	out, changed, err := hook.RemoveSettings([]byte(in))
	if err != nil || !changed || !jsonEqual(t, out, []byte(`{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"lint.sh"}]}]}}`)) {
		t.Fatalf("%v %v %s", err, changed, out)
	}
}

func TestMergeSettingsRefusesMalformed(t *testing.T) {
	for _, in := range []string{`[1]`, `{"hooks": 3}`, `{"hooks": {"PreToolUse": {}}}`, `{"a":1} {"b":2}`, `{"hooks":{"PreToolUse":[{"hooks":"x"}]}}`} {
		if _, _, err := hook.MergeSettings([]byte(in), installed); !errors.Is(err, hook.ErrSettings) {
			t.Errorf("%s: %v, want ErrSettings", in, err)
		}
	}
}

// An entry changed by hand after it was moved behind the gateway is not
// overwritten by the restore; the others are put back.
func TestRestoreMCPServersKeepsLaterEdits(t *testing.T) {
	orig := `{"mcpServers":{"a":{"command":"node","args":["a.js"]},"b":{"command":"uvx","args":["b"]}}}`
	wrapped, changes, _, err := hook.WrapMCPServers([]byte(orig), []string{"mcpServers"}, "/bin/pedigree")
	if err != nil || len(changes) != 2 {
		t.Fatalf("%v %v", err, changes)
	}
	if again, more, _, _ := hook.WrapMCPServers(wrapped, []string{"mcpServers"}, "/bin/pedigree"); len(more) != 0 || string(again) != string(wrapped) {
		t.Fatalf("wrapping twice: %v", more)
	}
	edited := strings.Replace(string(wrapped), `"b.js"`, `"b.js"`, 1)
	edited = strings.Replace(edited, `"uvx"`, `"uvx-edited"`, 1)
	back, restored, kept, err := hook.RestoreMCPServers([]byte(edited), []string{"mcpServers"}, changes)
	if err != nil || len(restored) != 1 || restored[0] != "a" || len(kept) != 1 || kept[0] != "b" {
		t.Fatalf("restore: %v %v %v", err, restored, kept)
	}
	if !strings.Contains(string(back), `"a.js"`) || strings.Contains(string(back), `"--", "node"`) {
		t.Fatalf("%s", back)
	}
}
