package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A scripted upstream: the test binary, run as a raw stdio MCP server
// whose every answer a script file says, read again at each request (an
// attacker's server may change at any time). It does what no reference
// server does on demand: answer with JSON-RPC errors, change its tools
// and tell the gateway so, send progress with text, log, and ask the
// gateway to elicit or sample.

type script struct {
	Instructions string           `json:"instructions,omitempty"`
	Tools        []map[string]any `json:"tools"`
	Prompts      []map[string]any `json:"prompts,omitempty"`
	Resources    []map[string]any `json:"resources,omitempty"`
	Templates    []map[string]any `json:"templates,omitempty"`
	// Calls, Reads and Gets answer tools/call by tool, resources/read by
	// URI and prompts/get by name; Complete answers completion/complete.
	Calls    map[string]behaviour `json:"calls,omitempty"`
	Reads    map[string]behaviour `json:"reads,omitempty"`
	Gets     map[string]behaviour `json:"gets,omitempty"`
	Complete *behaviour           `json:"complete,omitempty"`
	// Subscribe answers resources/subscribe.
	Subscribe *behaviour `json:"subscribe,omitempty"`
	// Executed is a file each tools/call is appended to (what ran).
	Executed string `json:"executed,omitempty"`
}

type behaviour struct {
	Result any            `json:"result,omitempty"`
	Error  *jsonrpc.Error `json:"error,omitempty"`
	// Sent before the answer: progress messages (under the request's
	// token), log messages, an elicitation and a sampling request to the
	// gateway, a resources/updated notification, tools/list_changed.
	Progress    []string `json:"progress,omitempty"`
	Log         []string `json:"log,omitempty"`
	Elicit      string   `json:"elicit,omitempty"`
	Sample      string   `json:"sample,omitempty"`
	Updated     string   `json:"updated,omitempty"`
	ListChanged bool     `json:"list_changed,omitempty"`
}

func textResult(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

// scripted is the upstream NAME run from the script at path.
func scripted(t testing.TB, name, path string) Upstream {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Upstream{Name: name, Principal: "tool:" + name, Command: self, Args: []string{"-test.run=^$"},
		Env: []string{"PEDIGREE_GATEWAY_TEST_UPSTREAM=script", "PEDIGREE_GATEWAY_TEST_SCRIPT=" + path}}
}

// writeScript writes a script where the upstream reads it, at once.
func writeScript(t testing.TB, path string, s *script) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func runScripted(path string) {
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	send := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	answer := func(id json.RawMessage, b *behaviour, def any) {
		switch {
		case b == nil:
			send(map[string]any{"jsonrpc": "2.0", "id": id, "result": def})
		case b.Error != nil:
			send(map[string]any{"jsonrpc": "2.0", "id": id, "error": b.Error})
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": id, "result": b.Result})
		}
	}
	next := 0
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name     string         `json:"name"`
				URI      string         `json:"uri"`
				Meta     map[string]any `json:"_meta"`
				Protocol string         `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.Method == "" || len(m.ID) == 0 {
			continue // notifications, and the gateway's answers to our requests
		}
		var s script
		if b, err := os.ReadFile(path); err == nil {
			json.Unmarshal(b, &s)
		}
		before := func(b *behaviour) {
			if b == nil {
				return
			}
			for _, p := range b.Progress {
				if tok, ok := m.Params.Meta["progressToken"]; ok {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
						"params": map[string]any{"progressToken": tok, "progress": 1, "message": p}})
				}
			}
			for _, l := range b.Log {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "error", "data": l}})
			}
			if b.Elicit != "" {
				next++
				send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprintf("up-%d", next), "method": "elicitation/create",
					"params": map[string]any{"message": b.Elicit, "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}}})
			}
			if b.Sample != "" {
				next++
				send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprintf("up-%d", next), "method": "sampling/createMessage",
					"params": map[string]any{"maxTokens": 10, "messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": b.Sample}}}}})
			}
			if b.Updated != "" {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": map[string]any{"uri": b.Updated}})
			}
			if b.ListChanged {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
			}
		}
		list := func(key string, xs []map[string]any) {
			if xs == nil {
				xs = []map[string]any{}
			}
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{key: xs}})
		}
		switch m.Method {
		case "initialize":
			res := map[string]any{"protocolVersion": m.Params.Protocol, "serverInfo": map[string]any{"name": "scripted", "version": "1"},
				"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}, "prompts": map[string]any{},
					"resources": map[string]any{"subscribe": true}, "completions": map[string]any{}, "logging": map[string]any{}}}
			if s.Instructions != "" {
				res["instructions"] = s.Instructions
			}
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
		case "tools/list":
			list("tools", s.Tools)
		case "prompts/list":
			list("prompts", s.Prompts)
		case "resources/list":
			list("resources", s.Resources)
		case "resources/templates/list":
			list("resourceTemplates", s.Templates)
		case "tools/call":
			if s.Executed != "" {
				f, err := os.OpenFile(s.Executed, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					fmt.Fprintf(f, "%s\n", in.Bytes())
					f.Close()
				}
			}
			b := lookup(s.Calls, m.Params.Name)
			before(b)
			answer(m.ID, b, textResult("ok"))
		case "resources/read":
			b := lookup(s.Reads, m.Params.URI)
			before(b)
			answer(m.ID, b, map[string]any{"contents": []any{map[string]any{"uri": m.Params.URI, "text": "nothing"}}})
		case "prompts/get":
			b := lookup(s.Gets, m.Params.Name)
			before(b)
			answer(m.ID, b, map[string]any{"messages": []any{}})
		case "completion/complete":
			before(s.Complete)
			answer(m.ID, s.Complete, map[string]any{"completion": map[string]any{"values": []string{}}})
		case "resources/subscribe":
			before(s.Subscribe)
			answer(m.ID, s.Subscribe, map[string]any{})
		default: // ping, unsubscribe, logging/setLevel
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}})
		}
	}
}

func lookup(m map[string]behaviour, k string) *behaviour {
	if b, ok := m[k]; ok {
		return &b
	}
	return nil
}

// tap is a host's transport that shows the test every message the host
// receives, as it receives it.
type tap struct {
	mcp.Transport
	seen func(raw []byte)
}

type tapConn struct {
	mcp.Connection
	seen func(raw []byte)
}

func (t tap) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return tapConn{c, t.seen}, nil
}

func (c tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		if raw, eerr := jsonrpc.EncodeMessage(msg); eerr == nil {
			c.seen(raw)
		}
	}
	return msg, err
}
