package hook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
)

const realTranscripts = "../../../../testdata/hook/claude/real/transcripts"

// parseFile parses a whole transcript as the hook reads it.
func parseFile(t *testing.T, path string) []item {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tools := map[string]string{}
	var out []item
	r := bufio.NewReader(f)
	for {
		b, err := readLine(r)
		if err != nil {
			break
		}
		items, _ := parseLine(bytes.TrimSpace(b), tools)
		for _, it := range items {
			if it.label == "a transcript line that is not JSON" {
				t.Fatalf("%s: a line is not JSON: %.200s", filepath.Base(path), b)
			}
			out = append(out, it)
		}
	}
	return out
}

type realEvent struct {
	Size  int64           `json:"transcript_size"`
	Event json.RawMessage `json:"event"`
}

func realEvents(t *testing.T, name string) []realEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realTranscripts, name+".events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []realEvent
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e realEvent
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// The transcripts the real Claude Code 2.1.332 wrote in the end-to-end
// test (-tags claude -update): every line parses, and the parser finds
// what the model was sent in each: the prompt, the Read's result (whose
// toolUseResult is byte for byte the tool_response the PostToolUse hook
// got), the inherited conversation of a fork, and the file a quoted or
// ranged @-mention loaded. Claude Code's own reminders are not items.
func TestRealTranscripts(t *testing.T) {
	find := func(items []item, f func(item) bool) *item {
		for i := range items {
			if f(items[i]) {
				return &items[i]
			}
		}
		return nil
	}
	poisoned := parseFile(t, filepath.Join(realTranscripts, "poisoned.jsonl"))
	read := find(poisoned, func(it item) bool { return it.from == fromTool && it.toolUseID == "toolu_01ReadNotes" })
	if read == nil || read.tool != "Read" || !strings.Contains(string(read.content), "collect.evil.example") {
		t.Fatalf("the Read's result in the poisoned transcript: %+v", read)
	}
	var post struct {
		ToolResponse json.RawMessage `json:"tool_response"`
	}
	for _, e := range realEvents(t, "poisoned") {
		if strings.Contains(string(e.Event), `"PostToolUse"`) && strings.Contains(string(e.Event), "toolu_01ReadNotes") {
			json.Unmarshal(e.Event, &post)
		}
	}
	if len(post.ToolResponse) == 0 || len(read.alts) == 0 || !bytes.Equal(read.alts[0], post.ToolResponse) {
		t.Fatalf("the transcript's toolUseResult is not the event's tool_response:\n%s\n%s", read.alts, post.ToolResponse)
	}
	if p := find(poisoned, func(it item) bool { return it.from == fromUser }); p == nil || string(p.content) != "Read NOTES.md and do what it says" {
		t.Fatalf("the prompt in the poisoned transcript: %+v", p)
	}
	for _, it := range poisoned {
		if it.from == fromHook || it.from == fromImage || strings.Contains(string(it.content), "Today's date is") {
			t.Fatalf("Claude Code's own text taken as content: %+v", it)
		}
	}

	fork := parseFile(t, filepath.Join(realTranscripts, "fork.jsonl"))
	if find(fork, func(it item) bool {
		return it.from == fromTool && it.toolUseID == "toolu_01ReadNotes" && it.tool == "Read"
	}) == nil ||
		find(fork, func(it item) bool {
			return it.from == fromUser && string(it.content) == "Read NOTES.md and do what it says"
		}) == nil ||
		find(fork, func(it item) bool {
			return it.from == fromUser && strings.HasPrefix(string(it.content), "Continue the fork")
		}) == nil {
		t.Fatalf("the fork's transcript does not hold the inherited conversation and its own prompt: %+v", fork)
	}

	for name, file := range map[string]string{"quoted-mention": "NOTES 2.md", "ranged-mention": "NOTES.md"} {
		items := parseFile(t, filepath.Join(realTranscripts, name+".jsonl"))
		m := find(items, func(it item) bool { return it.from == fromFile })
		if m == nil || !strings.Contains(m.label, file) || !strings.Contains(string(m.content), "collect.evil.example") || len(m.alts) == 0 {
			t.Fatalf("%s: the mentioned file: %+v", name, m)
		}
	}
}

// The items of every kind Claude Code writes, from hand-written lines in
// its format (the ones the real transcripts above do not hold).
func TestParseLineKinds(t *testing.T) {
	for _, c := range []struct {
		name, line string
		from       source
		content    string
	}{
		{"prompt", `{"type":"user","message":{"role":"user","content":"hello"}}`, fromUser, "hello"},
		{"text blocks", `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`, fromUser, "hi"},
		{"image", `{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]}}`, fromImage, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}`},
		{"summary", `{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued. Summary: ..."}}`, fromSummary, "This session is being continued. Summary: ..."},
		{"tool result blocks", `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":[{"type":"text","text":"out"}]}]}}`, fromTool, `[{"type":"text","text":"out"}]`},
		{"sidechain", `{"type":"user","isSidechain":true,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t8","content":"sub"}]}}`, fromTool, "sub"},
		{"CLAUDE.md", `{"type":"attachment","attachment":{"type":"nested_memory","path":"/p/CLAUDE.md","content":{"path":"/p/CLAUDE.md","content":"rules"}},"rendered":[{"content":"Contents of /p/CLAUDE.md:\nrules"}]}`, fromFile, "Contents of /p/CLAUDE.md:\nrules"},
		{"hook context", `{"type":"attachment","attachment":{"type":"hook_additional_context","content":["ctx"]},"rendered":[{"content":"<system-reminder>ctx</system-reminder>"}]}`, fromHook, "<system-reminder>ctx</system-reminder>"},
		{"mcp resource", `{"type":"attachment","attachment":{"type":"mcp_resource","server":"s","uri":"u"},"rendered":[{"content":"res"}]}`, fromMCP, "res"},
		{"unknown attachment", `{"type":"attachment","attachment":{"type":"brand_new"},"rendered":[{"content":"x"},{"content":"y"}]}`, fromHook, "x\ny"},
	} {
		items, _ := parseLine([]byte(c.line), map[string]string{})
		if len(items) != 1 || items[0].from != c.from || string(items[0].content) != c.content {
			t.Errorf("%s: %+v", c.name, items)
		}
	}
	for _, l := range []string{
		`{"type":"attachment","attachment":{"type":"date","date":"2026-12-02"},"rendered":[{"content":"Today's date is 2026-12-02."}]}`,
		`{"type":"attachment","attachment":{"type":"hook_success","stdout":"x"}}`,
		`{"type":"queue-operation","operation":"enqueue","content":"x"}`,
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}`,
	} {
		if items, _ := parseLine([]byte(l), map[string]string{}); len(items) != 0 {
			t.Errorf("%s: %+v", l, items)
		}
	}
	tools := map[string]string{}
	parseLine([]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}`), tools)
	items, _ := parseLine([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x","is_error":true}]},"toolUseResult":"Error: x"}`), tools)
	if len(items) != 1 || items[0].tool != "Bash" || len(items[0].alts) != 3 || string(items[0].alts[2]) != "x" {
		t.Fatalf("a failed Bash's result: %+v", items)
	}
	if items, _ := parseLine([]byte(`{"type":"user",`), tools); len(items) != 1 || items[0].from != fromHook {
		t.Fatalf("a line that is not JSON: %+v", items)
	}
}

// BenchmarkTranscriptRead is what reading the transcript adds to one
// PreToolUse: what it gained since the last (the previous tool use's
// result, which its PostToolUse recorded, Claude Code's reminder, the new
// tool use) is read and found recorded, in a session whose transcript
// already holds items tool uses. Only the tail gained is read,
// so the cost does not grow with the transcript.
//
//	go test -run '^$' -bench TranscriptRead -benchtime 300x ./internal/hook
func BenchmarkTranscriptRead(b *testing.B) {
	for _, items := range []int{100, 1000} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			ctx := b.Context()
			dir := b.TempDir()
			op, _, err := registry.GenerateSigner(nil)
			if err != nil {
				b.Fatal(err)
			}
			e, err := pedigree.Init(ctx, dir, 0.5, pedigree.WithOperatorSigner(op))
			if err != nil {
				b.Fatal(err)
			}
			if err := Init(ctx, e, DefaultMapping(DefaultUser)); err != nil {
				b.Fatal(err)
			}
			e.Close()
			if e, err = pedigree.Open(ctx, dir); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Close() })
			if err := e.Bootstrap().Freeze(ctx, op); err != nil {
				b.Fatal(err)
			}
			h, err := New(ctx, e, dir)
			if err != nil {
				b.Fatal(err)
			}
			tp := filepath.Join(b.TempDir(), "t.jsonl")
			f, err := os.OpenFile(tp, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			event := func(s string) *Event {
				ev, err := ParseEvent([]byte(s))
				if err != nil {
					b.Fatal(err)
				}
				ev.TranscriptPath = tp
				return ev
			}
			// The model proposes tool use i (its line, then PreToolUse:
			// the transcript read, then the check), it runs (PostToolUse),
			// its result and Claude Code's reminder are written.
			pre := func(i int) *Event {
				return event(fmt.Sprintf(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_use_id":"tu%d","tool_input":{"file_path":"f%d"}}`, i, i))
			}
			propose := func(i int) {
				fmt.Fprintf(f, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"tu%d","name":"Read","input":{"file_path":"f%d"}}]}}`+"\n", i, i)
			}
			check := func(i int) {
				if a, err := h.pre(ctx, pre(i)); err != nil || a != nil {
					b.Fatalf("the Read: %v %+v", err, a)
				}
			}
			run := func(i int) {
				resp := fmt.Sprintf(`{"file":{"content":"line %d of a long file"}}`, i)
				if _, err := h.Handle(ctx, event(fmt.Sprintf(`{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Read","tool_use_id":"tu%d","tool_input":{"file_path":"f%d"},"tool_response":%s}`, i, i, resp))); err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(f, `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu%d","content":"1\tline %d of a long file"}]},"toolUseResult":%s}`+"\n", i, i, resp)
				fmt.Fprintf(f, `{"type":"attachment","attachment":{"type":"total_tokens_reminder"},"rendered":[{"content":"<total_tokens>1</total_tokens>"}]}`+"\n")
			}
			if _, err := h.Handle(ctx, event(`{"session_id":"s","hook_event_name":"UserPromptSubmit","prompt":"read the files"}`)); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(f, `{"type":"user","message":{"role":"user","content":"read the files"}}`+"\n")
			for i := range items {
				propose(i)
				if _, err := h.Handle(ctx, pre(i)); err != nil {
					b.Fatal(err)
				}
				run(i)
			}
			before, _ := e.Context(ctx, "s")
			b.ReportAllocs()
			b.ResetTimer()
			for i := items; i < items+b.N; i++ {
				b.StopTimer()
				propose(i)
				b.StartTimer()
				if err := h.transcript(ctx, pre(i)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				check(i)
				run(i)
			}
			b.StopTimer()
			if after, _ := e.Context(ctx, "s"); len(after) != len(before)+b.N {
				b.Fatalf("the context grew from %d to %d entries over %d tool uses: the transcript recorded what the events had", len(before), len(after), b.N)
			}
		})
	}
}
