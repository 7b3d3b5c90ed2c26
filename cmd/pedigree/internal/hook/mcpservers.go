package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// Moving the MCP servers configured for Claude Code behind the gateway:
// each stdio server's command becomes 'pedigree mcp run --name NAME --
// COMMAND ARGS...' (the one-line gateway), in place, keeping every other key
// of the file. What was there is returned, so that it can be put back
// exactly.

// MCPChange is one server moved behind the gateway: its entry before and
// after.
type MCPChange struct {
	Name     string          `json:"name"`
	Original json.RawMessage `json:"original"`
	Wrapped  json.RawMessage `json:"wrapped"`
}

// mcpEntry is what is read of an mcpServers entry.
type mcpEntry struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

var gatewayNameClean = regexp.MustCompile(`[^a-z0-9_-]+`)

// gatewayName is an upstream name the gateway takes for a server called
// name, or "" (the gateway then names it from its command).
func gatewayName(name string) string {
	n := strings.Trim(gatewayNameClean.ReplaceAllString(strings.ToLower(name), "-"), "-_")
	n = strings.ReplaceAll(n, "__", "_")
	if len(n) > 32 {
		n = n[:32]
	}
	if n == "" || n[0] < 'a' || n[0] > 'z' || n == "mcp-unverified" {
		return ""
	}
	return n
}

// IsWrapped says whether an mcpServers entry already runs behind a
// pedigree gateway.
func IsWrapped(command string, args []string, exe string) bool {
	// The binary itself, not a name that merely says pedigree (red team:
	// ./tools/pedigree-shim mcp run -- ./evil-server was left alone).
	return (command == exe || command == "pedigree") && len(args) >= 2 && args[0] == "mcp" && args[1] == "run"
}

// WrapMCPServers moves every stdio server of the mcpServers object found
// at path "at" of a Claude Code config (["mcpServers"] in ~/.claude.json
// or .mcp.json; ["projects", DIR, "mcpServers"] for one project's) behind
// 'exe mcp run'. Servers already behind it are left; http and sse servers
// are skipped, with the reason.
func WrapMCPServers(doc []byte, at []string, exe string) (out []byte, changes []MCPChange, skipped []string, err error) {
	out, err = editObjectAt(doc, at, func(servers object) (object, error) {
		for i, m := range servers {
			var e mcpEntry
			entry, perr := parseObject(m.Value)
			if perr != nil || json.Unmarshal(m.Value, &e) != nil {
				skipped = append(skipped, fmt.Sprintf("%s: not an mcpServers entry", m.Key))
				continue
			}
			switch {
			case e.Type != "" && e.Type != "stdio":
				skipped = append(skipped, fmt.Sprintf("%s: a %s server (the gateway fronts stdio servers): left as it is; its tool descriptions reach the model unsealed, so the hook records them as external content in every session, and calls that act there ask", m.Key, e.Type))
				continue
			case e.Command == "":
				skipped = append(skipped, fmt.Sprintf("%s: no command: left as it is", m.Key))
				continue
			case IsWrapped(e.Command, e.Args, exe):
				continue
			}
			args := []string{"mcp", "run"}
			if n := gatewayName(m.Key); n != "" {
				args = append(args, "--name", n)
			}
			args = append(append(args, "--", e.Command), e.Args...)
			cb, _ := json.Marshal(exe)
			ab, _ := json.Marshal(args)
			wrapped, _ := json.Marshal(entry.set("command", cb).set("args", ab))
			changes = append(changes, MCPChange{Name: m.Key, Original: compact(m.Value), Wrapped: wrapped})
			servers[i].Value = wrapped
		}
		return servers, nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if len(changes) == 0 {
		return doc, nil, skipped, nil
	}
	return out, changes, skipped, nil
}

// RestoreMCPServers puts back each changed entry that is still as it was
// written (another edit since is kept, and named in kept).
func RestoreMCPServers(doc []byte, at []string, changes []MCPChange) (out []byte, restored, kept []string, err error) {
	byName := map[string]MCPChange{}
	for _, c := range changes {
		byName[c.Name] = c
	}
	out, err = editObjectAt(doc, at, func(servers object) (object, error) {
		for i, m := range servers {
			c, ok := byName[m.Key]
			if !ok {
				continue
			}
			if !jsonEqual(m.Value, c.Wrapped) {
				kept = append(kept, m.Key)
				continue
			}
			servers[i].Value = c.Original
			restored = append(restored, m.Key)
		}
		return servers, nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	sort.Strings(restored)
	if len(restored) == 0 {
		return doc, nil, kept, nil
	}
	return out, restored, kept, nil
}

// editObjectAt applies edit to the object at path at of doc (nothing
// happens when the path is not there) and renders the document indented.
func editObjectAt(doc []byte, at []string, edit func(object) (object, error)) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return doc, nil
	}
	var rec func(raw json.RawMessage, at []string) (json.RawMessage, error)
	rec = func(raw json.RawMessage, at []string) (json.RawMessage, error) {
		o, err := parseObject(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSettings, err)
		}
		if len(at) == 0 {
			if o, err = edit(o); err != nil {
				return nil, err
			}
			return json.Marshal(o)
		}
		sub, ok := o.get(at[0])
		if !ok || string(sub) == "null" {
			return raw, nil
		}
		nsub, err := rec(sub, at[1:])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at[0], err)
		}
		return json.Marshal(o.set(at[0], nsub))
	}
	flat, err := rec(doc, at)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flat, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
