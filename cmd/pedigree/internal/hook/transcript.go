package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Claude Code writes every session to a transcript (the event's
// transcript_path): one JSON object a line, appended as the conversation
// goes. The lines of type "user" and "attachment" hold what the model is
// sent besides the system prompt: the person's prompts, tool results,
// files loaded by @-mentions, CLAUDE.md and other memory files, the
// context hooks add, compaction summaries. The hook reads what a
// transcript gained at each UserPromptSubmit and PreToolUse and records
// every item it has not recorded yet (see sync.go). This file only parses.
//
// The format is Claude Code's own and undocumented; the parser is checked
// against transcripts the real binary wrote (testdata/hook/claude/real/
// transcripts, TestRealTranscripts). What it does not know it treats as
// content: an attachment of an unknown type that the model is shown is
// recorded as unverified content, never skipped.

// source is whose an item is, which decides the principal it is recorded
// under (see Handler.principalOf).
type source int

const (
	// fromUser is text in a user turn: the person's prompt when the
	// UserPromptSubmit event recorded the same text, else content the hook
	// did not see typed (inherited, edited, a command's output).
	fromUser source = iota
	// fromTool is a tool's result, signed by the tool's output principal.
	fromTool
	// fromFile is a file Claude Code loaded without a tool call: an
	// @-mention in any form, a CLAUDE.md or memory file, a file re-read
	// after compaction, lines selected in an IDE.
	fromFile
	// fromMCP is an MCP resource loaded by an @-mention.
	fromMCP
	// fromHook is context a hook added, and any attachment the parser does
	// not know: unverified.
	fromHook
	// fromSummary is a compaction summary: the agent's own words about
	// what the session held, when the hook read the transcript before it;
	// unverified otherwise (a fork or --continue that starts with it).
	fromSummary
	// fromImage is an image or document block: the hook cannot read what
	// it says, so it is never the person's words.
	fromImage
)

// item is one piece of content the transcript shows the model was sent.
type item struct {
	from source
	// tool is the tool whose result this is ("" when the transcript the
	// hook has read does not name it), toolUseID its tool_use_id.
	tool, toolUseID string
	// content is what is recorded: the text the model was sent.
	content []byte
	// alts are other forms of the same content the event path records
	// (a tool's tool_response, a mentioned file's bytes): an entry of any
	// of these digests in the session means the item is recorded.
	alts [][]byte
	// label says where the item came from, for the reasons of decisions.
	label string
	// sidechain: written by a subagent.
	sidechain bool
	// meta: a user turn Claude Code wrote (isMeta), after the line parent.
	meta   bool
	parent string
	// tag: the line is Claude Code's tags of a slash command, line uuid.
	tag  *commandTag
	uuid string
}

// harnessAttachments are the attachments whose text is Claude Code's own
// (the date, the model's name, the working directory, the token budget,
// the listings of tools, agents and skills): not recorded. Every other
// attachment the model is shown is.
var harnessAttachments = map[string]bool{
	"environment": true, "model": true, "date": true, "total_tokens_reminder": true,
	"deferred_tools_delta": true, "agent_listing_delta": true, "skill_listing": true,
	"remote_session_change": true, "todo_reminder": true, "plan_mode": true,
	"plan_mode_exit": true, "plan_mode_reentry": true, "token_usage": true,
	"output_style": true, "critical_system_reminder": true,
	// Only the name of the file the person has open in their IDE.
	"opened_file_in_ide": true,
}

// fileAttachments load a file's text into the context.
var fileAttachments = map[string]bool{
	"file": true, "nested_memory": true, "compact_file_reference": true, "pdf_reference": true,
	"selected_lines_in_ide": true, "directory": true, "edited_text_file": true,
}

type line struct {
	Type string `json:"type"`
	// UUID marks a conversation line; Timestamp is when Claude Code first
	// wrote it (a copied conversation keeps its times).
	UUID             string `json:"uuid"`
	Timestamp        string `json:"timestamp"`
	IsSidechain      bool   `json:"isSidechain"`
	IsCompactSummary bool   `json:"isCompactSummary"`
	// IsMeta marks a user turn Claude Code wrote, not the person (a slash
	// command's text); ParentUUID is the line it follows.
	IsMeta        bool            `json:"isMeta"`
	ParentUUID    string          `json:"parentUuid"`
	Message       *message        `json:"message"`
	ToolUseResult json.RawMessage `json:"toolUseResult"`
	Attachment    *attachment     `json:"attachment"`
	Rendered      []struct {
		Content json.RawMessage `json:"content"`
	} `json:"rendered"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type attachment struct {
	Type        string          `json:"type"`
	Filename    string          `json:"filename"`
	DisplayPath string          `json:"displayPath"`
	Content     json.RawMessage `json:"content"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// parseLine returns the items one transcript line holds and, for a
// conversation line, when it was written (zero otherwise), and notes the
// tool uses an assistant line makes (tool_use_id to tool name) in tools.
// A line that is not a JSON object (a write cut short by a crash, then
// appended to) is one item of content nobody vouches for: recorded, never
// skipped, and no reason to stop the session.
func parseLine(b []byte, tools map[string]string) ([]item, time.Time) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return []item{{from: fromHook, content: b, label: "a transcript line that is not JSON"}}, time.Time{}
	}
	var written time.Time
	if l.UUID != "" {
		written, _ = time.Parse(time.RFC3339Nano, l.Timestamp)
	}
	switch l.Type {
	case "assistant":
		// The model's own turns derive from what it was sent: not
		// recorded. Its tool uses name the tools whose results follow.
		if l.Message != nil {
			for _, b := range blocks(l.Message.Content) {
				if b.Type == "tool_use" && b.ID != "" {
					tools[b.ID] = b.Name
				}
			}
		}
		return nil, written
	case "user":
		if l.Message == nil {
			return nil, written
		}
		return userItems(&l, tools), written
	case "attachment":
		if l.Attachment == nil || len(l.Rendered) == 0 {
			return nil, written // not shown to the model (a hook's exit status, the system prompt's snapshot)
		}
		return attachmentItems(&l), written
	}
	// Claude Code's bookkeeping (queue operations, titles, costs, the API
	// requests' digests) and its system lines: not sent as conversation.
	return nil, written
}

// harnessTexts are user turns Claude Code writes itself when the person
// interrupts it: not content.
var harnessTexts = map[string]bool{
	"[Request interrupted by user]":              true,
	"[Request interrupted by user for tool use]": true,
}

func userItems(l *line, tools map[string]string) []item {
	var s string
	if json.Unmarshal(l.Message.Content, &s) == nil {
		if harnessTexts[s] {
			return nil
		}
		from, label := fromUser, "a user turn of the transcript"
		if l.IsCompactSummary {
			from, label = fromSummary, "a compaction summary"
		}
		it := item{from: from, content: []byte(s), label: label, sidechain: l.IsSidechain, meta: l.IsMeta}
		if tag, ok := parseCommandTags(s); ok && !l.IsCompactSummary && !l.IsMeta {
			// Claude Code's tags of a slash command: the prompt as
			// typed is the same turn (slash.go).
			it.tag, it.uuid = &tag, l.UUID
			it.alts = append(it.alts, []byte(tag.typed()))
		}
		return []item{it}
	}
	var raws []json.RawMessage
	json.Unmarshal(l.Message.Content, &raws)
	var out []item
	for _, raw := range raws {
		var b contentBlock
		json.Unmarshal(raw, &b)
		switch b.Type {
		case "text":
			if harnessTexts[b.Text] {
				continue
			}
			from, label := fromUser, "a user turn of the transcript"
			if l.IsCompactSummary {
				from, label = fromSummary, "a compaction summary"
			}
			out = append(out, item{from: from, content: []byte(b.Text), label: label, sidechain: l.IsSidechain, meta: l.IsMeta, parent: l.ParentUUID})
		case "tool_result":
			it := item{from: fromTool, toolUseID: b.ToolUseID, tool: tools[b.ToolUseID], content: resultText(b.Content), sidechain: l.IsSidechain}
			delete(tools, b.ToolUseID)
			it.label = "the result of " + orUnknown(it.tool)
			if len(l.ToolUseResult) > 0 {
				// The same result as Claude Code hands the PostToolUse
				// hook its tool_response (byte for byte, TestRealTranscripts),
				// or the error text of a PostToolUseFailure.
				it.alts = append(it.alts, l.ToolUseResult)
				var e string
				if json.Unmarshal(l.ToolUseResult, &e) == nil {
					it.alts = append(it.alts, []byte(e), []byte(strings.TrimPrefix(e, "Error: ")))
				}
			}
			out = append(out, it)
		default:
			// An image, a document, anything else: recorded whole, as
			// content the hook cannot read.
			out = append(out, item{from: fromImage, content: []byte(raw), label: "a " + orUnknown(b.Type) + " block of a user turn", sidechain: l.IsSidechain})
		}
	}
	return out
}

func attachmentItems(l *line) []item {
	a := l.Attachment
	if harnessAttachments[a.Type] {
		return nil
	}
	var text bytes.Buffer
	for i, r := range l.Rendered {
		if i > 0 {
			text.WriteByte('\n')
		}
		var s string
		if json.Unmarshal(r.Content, &s) == nil {
			text.WriteString(s)
		} else {
			text.Write(r.Content)
		}
	}
	it := item{content: text.Bytes(), sidechain: l.IsSidechain}
	name := a.DisplayPath
	if name == "" {
		name = a.Filename
	}
	switch {
	case fileAttachments[a.Type]:
		it.from, it.label = fromFile, fmt.Sprintf("%s (loaded into the context: %s)", clip(name), a.Type)
		// The file's own text, as a mention the prompt parser found
		// records it.
		var f struct {
			File struct {
				Content *string `json:"content"`
			} `json:"file"`
		}
		if json.Unmarshal(a.Content, &f) == nil && f.File.Content != nil {
			it.alts = append(it.alts, []byte(*f.File.Content))
		}
		var s string
		if json.Unmarshal(a.Content, &s) == nil {
			it.alts = append(it.alts, []byte(s))
		}
	case a.Type == "mcp_resource":
		it.from, it.label = fromMCP, "an MCP resource "+clip(name)+" (loaded into the context)"
	default:
		it.from, it.label = fromHook, "a "+clip(a.Type)+" attachment"
	}
	return []item{it}
}

// resultText is a tool_result's content as the model gets it: the text
// when it is a string, else the blocks as they are (text and images).
func resultText(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	return []byte(raw)
}

func blocks(raw json.RawMessage) []contentBlock {
	var bs []contentBlock
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	return bs
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown tool"
	}
	return clip(s)
}
