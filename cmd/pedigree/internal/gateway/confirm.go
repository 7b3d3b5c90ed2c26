package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A file server's confirmation of a write ("Successfully wrote to PATH")
// is made of the call's own arguments and nothing else: it carries no
// content the model could be steered by. Recorded as the upstream's output
// it would taint the session (a filesystem server at tier external) and
// deny its next write; so a result that is exactly the confirmation these
// arguments give is recorded as the agent's, derived from the call, at the
// tier of what was written. Any other result, an error, one more field, is
// the upstream's.

// maxStoredWrite bounds the written content kept beside its digest.
const maxStoredWrite = 64 << 10

// Confirmation is the whole text a tool's result holds when it only
// confirms a write with these arguments (canonical JSON), or "" for a tool
// whose results are not such confirmations.
func Confirmation(tool string, args []byte) string {
	var a struct {
		Path        string `json:"path"`
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	switch tool {
	case "write_file":
		if a.Path != "" {
			return "Successfully wrote to " + a.Path
		}
	case "create_directory":
		if a.Path != "" {
			return "Successfully created directory " + a.Path
		}
	case "move_file":
		if a.Source != "" && a.Destination != "" {
			return "Successfully moved " + a.Source + " to " + a.Destination
		}
	}
	return ""
}

// confirms says whether res is exactly the confirmation of tool with args:
// one text block of that text, and, if any, structured content holding that
// text alone.
func confirms(tool string, args []byte, res *mcp.CallToolResult) bool {
	want := Confirmation(tool, args)
	if want == "" || res.IsError || len(res.Content) != 1 {
		return false
	}
	t, ok := res.Content[0].(*mcp.TextContent)
	if !ok || t.Text != want || t.Meta != nil || t.Annotations != nil {
		return false
	}
	if res.StructuredContent == nil {
		return true
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return false
	}
	var sc map[string]any
	if json.Unmarshal(b, &sc) != nil || len(sc) != 1 || sc["content"] != want {
		return false
	}
	return true
}

// fileText is the whole text of a file read (the reference filesystem
// server's read_text_file or read_file without head or tail): one text
// block, and, if any, structured content holding that text alone.
func fileText(tool string, args []byte, res *mcp.CallToolResult) (string, bool) {
	var a struct {
		Head *int `json:"head"`
		Tail *int `json:"tail"`
	}
	if (tool != "read_text_file" && tool != "read_file") || json.Unmarshal(args, &a) != nil || a.Head != nil || a.Tail != nil ||
		res.IsError || len(res.Content) != 1 {
		return "", false
	}
	t, ok := res.Content[0].(*mcp.TextContent)
	if !ok || t.Meta != nil || t.Annotations != nil {
		return "", false
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		var sc map[string]any
		if err != nil || json.Unmarshal(b, &sc) != nil || len(sc) != 1 || sc["content"] != t.Text {
			return "", false
		}
	}
	return t.Text, true
}

// writtenText is what a write_file stored.
func writtenText(tool string, args []byte) (string, bool) {
	var a struct {
		Content *string `json:"content"`
	}
	if tool != "write_file" || json.Unmarshal(args, &a) != nil || a.Content == nil {
		return "", false
	}
	return *a.Content, true
}
