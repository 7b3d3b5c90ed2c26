package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Merging pedigree's hooks into a Claude Code settings.json that a person
// keeps: every key they wrote stays, in their order; pedigree's hooks are
// recognised by their command (IsPedigreeCommand) and only those are
// replaced or removed.

// ErrSettings is a settings.json that cannot be merged: not a JSON object,
// or a "hooks" value of another shape than Claude Code's.
var ErrSettings = errors.New("settings.json cannot be merged")

// commandSuffix ends every command hook pedigree writes (see
// CommandSettings): the hook verb, then the fail-closed exit.
const commandSuffix = " hook claude || exit 2"

// IsPedigreeCommand says whether a hook command is one pedigree wrote: a
// command that ends in 'hook claude || exit 2', whatever the binary is
// called (red team: with --command /opt/bin/pg --dir /srv/guard no word
// said "pedigree", so a second install added the hooks again and uninstall
// left them).
func IsPedigreeCommand(command string) bool {
	return strings.HasSuffix(command, commandSuffix)
}

// member is one key of a JSON object, its value kept as written.
type member struct {
	Key   string
	Value json.RawMessage
}

// object is a JSON object that keeps its keys' order.
type object []member

func (o object) get(k string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.Key == k {
			return m.Value, true
		}
	}
	return nil, false
}

func (o object) set(k string, v json.RawMessage) object {
	for i, m := range o {
		if m.Key == k {
			o[i].Value = v
			return o
		}
	}
	return append(o, member{k, v})
}

func (o object) del(k string) object {
	out := o[:0:0]
	for _, m := range o {
		if m.Key != k {
			out = append(out, m)
		}
	}
	return out
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// parseObject decodes a JSON object, keeping its keys' order.
func parseObject(raw []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var o object
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		// Claude Code's JSON.parse keeps the last of duplicate keys, a
		// merge would fill the first (red team): refuse.
		if k, _ := t.(string); seen[k] {
			return nil, fmt.Errorf("the key %q appears twice", k)
		} else {
			seen[k] = true
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, member{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return o, nil
}

// MergeSettings returns settings (a settings.json's bytes; empty for a file
// that does not exist yet) with s's hooks in place of any pedigree hooks it
// held, and whether that changes anything. When it does not, the result is
// the input, byte for byte: a second install writes nothing.
func MergeSettings(settings []byte, s *Settings) ([]byte, bool, error) {
	doc, hooks, err := parseSettings(settings)
	if err != nil {
		return nil, false, err
	}
	// Claude Code runs no hook at all under disableAllHooks: pedigree's
	// would be written and never run (red team).
	if v, ok := doc.get("disableAllHooks"); ok && strings.TrimSpace(string(v)) != "false" {
		return nil, false, fmt.Errorf("%w: it sets \"disableAllHooks\": %s, so Claude Code would run none of pedigree's hooks; remove that setting, then install again", ErrSettings, strings.TrimSpace(string(v)))
	}
	for _, ev := range Events {
		groups, _, err := withoutPedigree(hooks, ev)
		if err != nil {
			return nil, false, err
		}
		for _, g := range s.Hooks[ev] {
			b, _ := json.Marshal(g)
			groups = append(groups, b)
		}
		b, _ := json.Marshal(groups)
		hooks = hooks.set(ev, b)
	}
	return render(settings, doc, hooks)
}

// RemoveSettings returns settings without any of pedigree's hooks (an event
// left with none, and a "hooks" left empty, are dropped), and whether that
// changes anything.
func RemoveSettings(settings []byte) ([]byte, bool, error) {
	doc, hooks, err := parseSettings(settings)
	if err != nil {
		return nil, false, err
	}
	kept, removed := object{}, false
	for _, m := range hooks {
		groups, n, err := withoutPedigree(hooks, m.Key)
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			kept = append(kept, m)
			continue
		}
		removed = true
		if len(groups) > 0 {
			b, _ := json.Marshal(groups)
			kept = append(kept, member{m.Key, b})
		}
	}
	if removed && len(kept) == 0 {
		return render(settings, doc.del("hooks"), nil)
	}
	if !removed {
		return settings, false, nil
	}
	return render(settings, doc, kept)
}

// HasPedigreeHooks says whether settings hold any of pedigree's hooks.
func HasPedigreeHooks(settings []byte) (bool, error) {
	_, changed, err := RemoveSettings(settings)
	return changed, err
}

func parseSettings(settings []byte) (doc, hooks object, err error) {
	if len(bytes.TrimSpace(settings)) == 0 {
		return object{}, object{}, nil
	}
	if doc, err = parseObject(settings); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrSettings, err)
	}
	raw, ok := doc.get("hooks")
	if !ok || string(raw) == "null" {
		return doc, object{}, nil
	}
	if hooks, err = parseObject(raw); err != nil {
		return nil, nil, fmt.Errorf("%w: \"hooks\": %v", ErrSettings, err)
	}
	return doc, hooks, nil
}

// withoutPedigree is event ev's matcher groups with pedigree's hooks taken
// out, and how many were; a group left with no hooks is dropped.
func withoutPedigree(hooks object, ev string) (out []json.RawMessage, removed int, err error) {
	raw, ok := hooks.get(ev)
	if !ok || string(raw) == "null" {
		return []json.RawMessage{}, 0, nil
	}
	var groups []json.RawMessage
	if err := json.Unmarshal(raw, &groups); err != nil {
		return nil, 0, fmt.Errorf("%w: hooks.%s is not a list of matcher groups", ErrSettings, ev)
	}
	out = []json.RawMessage{}
	for _, g := range groups {
		group, err := parseObject(g)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: hooks.%s: %v", ErrSettings, ev, err)
		}
		hraw, ok := group.get("hooks")
		if !ok {
			out = append(out, g)
			continue
		}
		var hs []json.RawMessage
		if err := json.Unmarshal(hraw, &hs); err != nil {
			return nil, 0, fmt.Errorf("%w: hooks.%s[].hooks is not a list", ErrSettings, ev)
		}
		var kept []json.RawMessage
		for _, h := range hs {
			var c struct {
				Type    string `json:"type"`
				Command string `json:"command"`
			}
			if json.Unmarshal(h, &c) == nil && c.Type == "command" && IsPedigreeCommand(c.Command) {
				removed++
				continue
			}
			kept = append(kept, h)
		}
		switch {
		case len(kept) == len(hs):
			out = append(out, g)
		case len(kept) > 0:
			b, _ := json.Marshal(kept)
			gb, _ := json.Marshal(group.set("hooks", b))
			out = append(out, gb)
		}
	}
	return out, removed, nil
}

// render writes doc with hooks (nil: none) back, indented; changed is
// false, and the input returned as it was, when the result means the same.
func render(orig []byte, doc, hooks object) ([]byte, bool, error) {
	if hooks != nil {
		hb, _ := json.Marshal(hooks)
		doc = doc.set("hooks", hb)
	}
	flat, _ := json.Marshal(doc)
	if len(bytes.TrimSpace(orig)) > 0 {
		var before, after any
		if json.Unmarshal(orig, &before) == nil && json.Unmarshal(flat, &after) == nil && reflect.DeepEqual(before, after) {
			return orig, false, nil
		}
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flat, "", "  "); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}
