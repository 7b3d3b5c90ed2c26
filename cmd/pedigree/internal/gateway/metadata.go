package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Metadata is what an upstream says about itself that reaches the host's
// model: each tool's name, title, description, schemas and annotations,
// and its prompts, resources and resource templates. 'mcp add' reads it
// into the upstream's entry of upstreams.json, which the operator's seal
// covers: what is sealed is vouched for by the operator, and listing it
// records nothing. Whatever an upstream offers that differs from it is
// recorded as the upstream's content in each session that lists it
// (listing.go).
type Metadata struct {
	Tools     []*mcp.Tool             `json:"tools"`
	Prompts   []*mcp.Prompt           `json:"prompts,omitempty"`
	Resources []*mcp.Resource         `json:"resources,omitempty"`
	Templates []*mcp.ResourceTemplate `json:"resource_templates,omitempty"`
}

// Kinds of metadata items.
const (
	itemTool     = "tool"
	itemPrompt   = "prompt"
	itemResource = "resource"
	itemTemplate = "resource_template"
)

// ReadMetadata reads an upstream's prompts, resources and resource
// templates, besides the tools already read, as far as it offers them.
func ReadMetadata(ctx context.Context, cs *mcp.ClientSession, tools []*mcp.Tool) (*Metadata, error) {
	md := &Metadata{Tools: tools}
	if md.Tools == nil {
		md.Tools = []*mcp.Tool{}
	}
	var caps *mcp.ServerCapabilities
	if r := cs.InitializeResult(); r != nil {
		caps = r.Capabilities
	}
	if caps == nil {
		return md, nil
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("prompts/list: %w", err)
			}
			md.Prompts = append(md.Prompts, p)
		}
	}
	if caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/list: %w", err)
			}
			md.Resources = append(md.Resources, r)
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/templates/list: %w", err)
			}
			md.Templates = append(md.Templates, t)
		}
	}
	return md, nil
}

// metaItem is one item of metadata, by kind and key (a tool's or prompt's
// name, a resource's URI, a template's URI template).
type metaItem struct {
	kind, key string
	v         any
}

func (m *Metadata) items() []metaItem {
	if m == nil {
		return nil
	}
	var out []metaItem
	for _, t := range m.Tools {
		out = append(out, metaItem{itemTool, t.Name, t})
	}
	for _, p := range m.Prompts {
		out = append(out, metaItem{itemPrompt, p.Name, p})
	}
	for _, r := range m.Resources {
		out = append(out, metaItem{itemResource, r.URI, r})
	}
	for _, t := range m.Templates {
		out = append(out, metaItem{itemTemplate, t.URITemplate, t})
	}
	return out
}

// find is the sealed form of an item, or nil.
func (m *Metadata) find(kind, key string) any {
	for _, it := range m.items() {
		if it.kind == kind && it.key == key {
			return it.v
		}
	}
	return nil
}

// sealedAs reports whether an item an upstream offers now is the one the
// operator sealed, compared as JSON (as the host would receive both).
func (m *Metadata) sealedAs(kind, key string, now any) bool {
	was := m.find(kind, key)
	if was == nil {
		return false
	}
	a, err1 := json.Marshal(was)
	b, err2 := json.Marshal(now)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// Change is one difference between what an upstream offers and what the
// operator sealed.
type Change struct {
	Kind string `json:"kind"` // tool, prompt, resource or resource_template
	Name string `json:"name"`
	// Change is changed, new (not sealed) or removed (sealed, no longer
	// offered).
	Change string `json:"change"`
}

func (c Change) String() string { return fmt.Sprintf("%s %s %s", c.Kind, c.Name, c.Change) }

// Diff says how now differs from sealed, item by item, in order.
func Diff(sealed, now *Metadata) []Change {
	out := []Change{}
	offered := map[string]bool{}
	for _, it := range now.items() {
		offered[it.kind+"\x00"+it.key] = true
		switch {
		case sealed.find(it.kind, it.key) == nil:
			out = append(out, Change{it.kind, it.key, "new"})
		case !sealed.sealedAs(it.kind, it.key, it.v):
			out = append(out, Change{it.kind, it.key, "changed"})
		}
	}
	for _, it := range sealed.items() {
		if !offered[it.kind+"\x00"+it.key] {
			out = append(out, Change{it.kind, it.key, "removed"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Flag is metadata that reads like an instruction to the model, which the
// operator should read before sealing it.
type Flag struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Field string `json:"field"`
	Why   string `json:"why"`
}

func (f Flag) String() string { return fmt.Sprintf("%s %s: %s %s", f.Kind, f.Name, f.Field, f.Why) }

// instructionLike are phrasings addressed to the model rather than
// describing a tool (tool poisoning).
var instructionLike = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|admin|secret|hidden)\b`), "holds a tag addressed to the model"},
	{regexp.MustCompile(`(?i)\bbefore (answering|responding|replying|using|calling|you|any)\b`), `says what to do "before" the task`},
	{regexp.MustCompile(`(?i)\b(ignore|disregard|forget)\b.{0,20}\b(previous|prior|above|earlier|all|other)\b`), "tells the model to ignore something"},
	{regexp.MustCompile(`(?i)\b(do not|don't|never)\s+(tell|mention|inform|reveal|show|notify)\b`), "tells the model to keep something from the person"},
	{regexp.MustCompile(`(?i)\b(you must|you should always|always (call|use|run|send|include)|must (first )?(call|use|run|send|read))\b`), "gives the model an order"},
	{regexp.MustCompile(`(?i)(^|[\s.:>])(system|assistant)\s*:`), "speaks as the system or the assistant"},
}

// callsTool finds "call X" / "use X" / "run X" naming a tool.
var callsTool = regexp.MustCompile("(?i)\\b(call|calls|calling|use|invoke|run|execute)\\s+(the\\s+)?[`'\"]?([A-Za-z_][A-Za-z0-9_.-]*)")

// Suspicious flags metadata that reads like instructions to the model:
// tags, "before answering", "ignore previous", orders, text in the voice
// of the system, a description that tells the model to call a tool by
// name (any of known, or another tool of the same server), and characters
// a person does not see. It is a prompt to read, not a verdict.
func Suspicious(md *Metadata, known []string) []Flag {
	names := map[string]bool{}
	for _, n := range known {
		names[strings.ToLower(n)] = true
	}
	for _, t := range md.Tools {
		names[strings.ToLower(t.Name)] = true
	}
	var out []Flag
	for _, it := range md.items() {
		b, err := json.Marshal(it.v)
		if err != nil {
			continue
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			continue
		}
		seen := map[string]bool{}
		walkStrings(v, "", func(field, s string) {
			for _, why := range flagsOf(s, it, names) {
				if k := field + "\x00" + why; !seen[k] {
					seen[k] = true
					out = append(out, Flag{Kind: it.kind, Name: it.key, Field: field, Why: why})
				}
			}
		})
	}
	return out
}

func flagsOf(s string, it metaItem, names map[string]bool) []string {
	var out []string
	for _, p := range instructionLike {
		if p.re.MatchString(s) {
			out = append(out, p.why)
		}
	}
	for _, m := range callsTool.FindAllStringSubmatch(s, -1) {
		name := strings.ToLower(strings.TrimRight(m[3], ".-"))
		if names[name] && !(it.kind == itemTool && strings.EqualFold(name, it.key)) {
			out = append(out, "tells the model to call "+m[3])
			break
		}
	}
	for _, r := range s {
		if invisible(r) {
			out = append(out, fmt.Sprintf("holds a character a person does not see (U+%04X)", r))
			break
		}
	}
	return out
}

// invisible: format characters (zero-width, bidi controls, tags), and
// controls other than tab and newline.
func invisible(r rune) bool {
	if r == '\n' || r == '\t' || r == '\r' {
		return false
	}
	return unicode.Is(unicode.Cf, r) || unicode.IsControl(r) || (r >= 0xE0000 && r <= 0xE007F)
}

// walkStrings calls f with every string in v, keys included, and where it
// is (a dotted path).
func walkStrings(v any, path string, f func(field, s string)) {
	switch x := v.(type) {
	case string:
		f(path, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			f(p+" (key)", k)
			walkStrings(x[k], p, f)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

// Without is m less every item a flag names: what an operator who did not
// read the flags may vouch for. An item left out is not sealed, so the
// gateway records it as the upstream's content in each session that
// receives it.
func (m *Metadata) Without(flags []Flag) *Metadata {
	if m == nil || len(flags) == 0 {
		return m
	}
	out := map[[2]string]bool{}
	for _, f := range flags {
		out[[2]string{f.Kind, f.Name}] = true
	}
	keep := &Metadata{Tools: []*mcp.Tool{}}
	for _, t := range m.Tools {
		if !out[[2]string{itemTool, t.Name}] {
			keep.Tools = append(keep.Tools, t)
		}
	}
	for _, p := range m.Prompts {
		if !out[[2]string{itemPrompt, p.Name}] {
			keep.Prompts = append(keep.Prompts, p)
		}
	}
	for _, r := range m.Resources {
		if !out[[2]string{itemResource, r.URI}] {
			keep.Resources = append(keep.Resources, r)
		}
	}
	for _, r := range m.Templates {
		if !out[[2]string{itemTemplate, r.URITemplate}] {
			keep.Templates = append(keep.Templates, r)
		}
	}
	return keep
}
