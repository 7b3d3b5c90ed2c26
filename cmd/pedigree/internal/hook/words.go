package hook

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What a person reads at an ask or a deny says first what the call would
// do that matters (runs this command, writes this file, sends to this
// address) and what untrusted content it followed; the gate's rule names
// stay in `gate log` and -o json.

// action says, in a few words, what a tool use would do.
func action(ev *Event) string {
	var in map[string]any
	json.Unmarshal(ev.ToolInput, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch ev.ToolName {
	case "Bash":
		return "runs the command " + quoted(str("command"))
	case "Write", "Edit", "MultiEdit":
		return "writes the file " + quoted(str("file_path"))
	case "NotebookEdit":
		return "writes the notebook " + quoted(str("notebook_path"))
	case "WebFetch":
		return "fetches " + quoted(str("url"))
	}
	for _, k := range []string{"to", "recipient", "recipients", "email", "address", "channel", "cc", "bcc"} {
		if v, ok := in[k]; ok {
			return "sends to " + quoted(flat(v))
		}
	}
	for _, k := range []string{"url", "uri"} {
		if v := str(k); v != "" {
			return "reaches " + quoted(v)
		}
	}
	name := ev.ToolName
	if parts := strings.SplitN(name, "__", 3); len(parts) == 3 && parts[0] == "mcp" {
		name = parts[2] + " of the MCP server " + parts[1]
	}
	if len(in) == 0 {
		return "calls " + name
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]string, 0, len(keys))
	for _, k := range keys {
		args = append(args, k+"="+flat(in[k]))
	}
	return "calls " + name + " with " + quoted(strings.Join(args, ", "))
}

func flat(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// quoted is a value as a person reads it: in backquotes, its control
// characters escaped, at most maxQuoted bytes.
func quoted(s string) string {
	const maxQuoted = 200
	var b strings.Builder
	for i, r := range s {
		if i >= maxQuoted {
			fmt.Fprintf(&b, "… (%d bytes)", len(s))
			break
		}
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r == '`':
			b.WriteString(`\x60`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return "`" + b.String() + "`"
}

// ruleless is a gate reason without its rule's name ("rule: text").
func ruleless(reason string) string {
	if rule, text, ok := strings.Cut(reason, ": "); ok && !strings.ContainsAny(rule, " ") {
		return text
	}
	return reason
}
