//go:build claude

package hook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a scripted Anthropic Messages API: it answers POST
// /v1/messages over the wire format Claude Code reads (server-sent events
// when the request streams, one JSON message otherwise). Each turn of a
// script is decided from the request itself: the number of the script's
// tool results the conversation holds so far picks the next tool_use, so
// the fake keeps no state between requests.
type fakeAPI struct {
	t *testing.T
	// script maps a user prompt's marker to the tool uses to make, in
	// order; after them the model says it is done.
	script map[string][]toolUse
	mu     sync.Mutex
	// results are the tool_result blocks Claude Code sent back, by tool_use id.
	results map[string]toolResult
	paths   []string
	// offered are the tools Claude Code offered the model: those of the
	// requests, and the deferred ones its reminders name.
	offered map[string]bool
}

// deferredList is the reminder that names the tools the model may load
// with ToolSearch, one per line.
var deferredList = regexp.MustCompile(`(?s)deferred tools are now available via ToolSearch[^\n]*\n(.*?)</system-reminder>`)

type toolUse struct {
	ID, Name string
	Input    map[string]any
}

type toolResult struct {
	Content string
	IsError bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	if r.Method != "POST" || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		io.WriteString(w, `{"input_tokens":10}`)
		return
	}
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.offered == nil {
		f.offered = map[string]bool{}
	}
	for _, t := range req.Tools {
		f.offered[t.Name] = true
	}
	for _, m := range req.Messages {
		for _, b := range contentBlocks(m.Content) {
			if l := deferredList.FindStringSubmatch(b.Text); l != nil {
				for _, name := range strings.Fields(l[1]) {
					f.offered[name] = true
				}
			}
		}
	}
	f.mu.Unlock()
	// The latest user text that holds a marker picks the script (the
	// longest marker it holds): a resumed or forked conversation carries
	// the earlier prompts too. Only the results of that script's own tool
	// uses count, so the earlier turns' results do not skip its steps.
	var uses []toolUse
	for _, m := range req.Messages {
		if m.Role != "user" || len(req.Tools) == 0 {
			continue
		}
		for _, b := range contentBlocks(m.Content) {
			if b.Type != "text" || strings.HasPrefix(strings.TrimSpace(b.Text), "<") {
				continue // Claude Code's own reminders and attachments
			}
			best := ""
			for marker, s := range f.script {
				if strings.Contains(b.Text, marker) && len(marker) > len(best) {
					best, uses = marker, s
				}
			}
		}
	}
	ids := map[string]bool{}
	for _, u := range uses {
		ids[u.ID] = true
	}
	done := 0
	for _, m := range req.Messages {
		for _, b := range contentBlocks(m.Content) {
			if b.Type == "tool_result" {
				if ids[b.ToolUseID] {
					done++
				}
				f.mu.Lock()
				f.results[b.ToolUseID] = toolResult{Content: b.text(), IsError: b.IsError}
				f.mu.Unlock()
			}
		}
	}
	var block map[string]any
	stop := "end_turn"
	if done < len(uses) {
		u := uses[done]
		block = map[string]any{"type": "tool_use", "id": u.ID, "name": u.Name, "input": u.Input}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": "Done."}
	}
	msg := map[string]any{"id": fmt.Sprintf("msg_%d", done), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}, "content": []any{}}
	if !req.Stream {
		msg["content"] = []any{block}
		msg["stop_reason"] = stop
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": msg})
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// text is a tool_result's content, a string or text blocks.
func (b block) text() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var parts []block
	json.Unmarshal(b.Content, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

func contentBlocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	json.Unmarshal(raw, &bs)
	return bs
}
