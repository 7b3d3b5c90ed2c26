package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/lineage"
)

// Files get principals by where their content came from, not by the tool
// that read them. What the agent wrote itself (Write, Edit, MultiEdit) is
// recorded as a memory entry the agent signs, derived from the call that
// wrote it, so it carries that call's labels; a Read that returns exactly
// the content of such entries (matched by digest, like the gateway matches
// memory) derives from them, and is signed by the agent: it holds no byte
// the agent did not write. Everything else is what the mapping says.

// origin is who signs a tool's output entry and what it derives from
// besides its call.
type origin struct {
	principal string
	parents   []lineage.Parent
	// written is the file content a Write or Edit left behind, recorded as
	// the agent's memory entry before the output (and then its parent);
	// before is the content an Edit changed, whose sources it keeps.
	written, before []byte
	edit            bool
	// items are what an MCP memory write stored, each recorded as the
	// agent's memory entry before the output.
	items []string
	// rule says, in the output's label, why this principal signs it.
	rule string
}

// origin decides how an output is recorded. It stores nothing: the output
// may have been recorded already (delivered twice).
func (h *Handler) origin(ctx context.Context, ev *Event, u *Use, mapped string) (*origin, error) {
	o := &origin{principal: mapped}
	if ev.HookEventName != PostToolUse {
		return o, nil
	}
	switch ev.ToolName {
	case "Write", "Edit", "MultiEdit":
		after, before, edit, ok := writtenFile(ev)
		if !ok {
			return o, nil
		}
		o.principal, o.written, o.before, o.edit = h.m.Agent, after, before, edit
		o.rule = "the agent's own write"
		return o, nil
	case "Task", "Agent":
		// A subagent's report is a model's words over what the subagent
		// read, and its tool uses came through these hooks in this
		// session: it derives from the whole context. A subagent run in
		// the cloud read what no hook saw: its report is the tool's. The
		// call was checked as one then (its recorded call says so), or is
		// one now (its agent definition may have changed since).
		if checkedTool(ev) == RemoteAgent || h.calledAs(ctx, ev, u, RemoteAgent) {
			return o, nil
		}
		ps, err := h.contextParents(ctx, ev.SessionID)
		if err != nil {
			return nil, err
		}
		o.principal, o.parents, o.rule = h.m.Agent, ps, "a subagent's report, derived from the session's context"
		return o, nil
	case "TaskCreate", "TaskUpdate":
		// The task list's echo of the call is the agent's own words, from
		// what the call derives from (tools.go); any other result is the
		// tool's output.
		if taskEchoed(ev.ToolName, ev.ToolInput, ev.ToolResponse) {
			o.principal, o.rule = h.m.Agent, "the agent's own words, echoed by the task list"
		}
		return o, nil
	case "Grep", "Glob", "LS":
		if p, rule := h.searchOrigin(ctx, ev); p != "" {
			o.principal, o.rule = p, rule
		}
		return o, nil
	case "Bash":
		var in struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(ev.ToolInput, &in) == nil {
			// A commit's message is the agent's own words: recorded as
			// its memory, so that git log can show it back (ownHistory).
			o.written = commitMessage(in.Command)
		}
		if p, rule := h.commandOrigin(ctx, ev); p != "" {
			o.principal, o.rule = p, rule
		}
		return o, nil
	case "Read":
		content, ok := readContent(ev)
		if !ok {
			return o, nil
		}
		ids, err := h.ownContent(ctx, content)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			if p, rule := h.vouched(filePath(ev), content); p != "" {
				o.principal, o.rule = p, rule
			}
			return o, nil
		}
		o.principal, o.rule = h.m.Agent, "content the agent wrote itself (entry "+short(ids[0])+")"
		for _, id := range ids {
			o.parents = append(o.parents, lineage.Parent{ID: id, Weight: 1})
		}
	default:
		if text, ok := fileConfirmation(ev); ok {
			o.principal, o.rule = h.m.Agent, "a file server's confirmation of the agent's write"
			var in struct {
				Content *string `json:"content"`
			}
			if json.Unmarshal(ev.ToolInput, &in) == nil && in.Content != nil && strings.HasPrefix(text, "Successfully wrote to ") {
				o.written = []byte(*in.Content)
			}
			return o, nil
		}
		if items, write := memoryItems(ev); write && len(items) > 0 {
			o.principal, o.items, o.rule = h.m.Agent, items, "the agent's own memory write"
		} else if len(items) > 0 {
			ps, ok, err := h.ownItems(ctx, items)
			if err != nil || !ok {
				return o, err
			}
			o.principal, o.parents, o.rule = h.m.Agent, ps, "memory the agent wrote itself"
		}
		return o, nil
	}
	return o, nil
}

// ownContent lists the memory entries over content (by its digest), each
// checked against its signed statement: what the agent wrote through the
// hook, or through the gateway (a write_file, a memory server's write).
// Whoever signed one, its labels are what the content inherits: an entry
// of an untrusted tier taints the read as surely as the file would have.
func (h *Handler) ownContent(ctx context.Context, content []byte) ([]string, error) {
	digest := lineage.DigestContent(content)
	ids, err := h.b.ByContent(ctx, digest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		v, err := h.b.Show(ctx, id)
		if err != nil || v.SignatureError != "" || v.Node == nil {
			continue
		}
		st, _, _, err := lineage.Open(v.Envelope)
		if err != nil || st.Kind != lineage.KindMemory || st.ContentDigest != digest {
			continue
		}
		out = append(out, id)
		if len(out) == lineage.MaxParents/2 {
			break
		}
	}
	return out, nil
}

// calledAs says the call recorded for this tool use was checked as tool,
// as the store holds it (the state file names the call, the store vouches
// for its tool); false when no call of this session is recorded for it.
func (h *Handler) calledAs(ctx context.Context, ev *Event, u *Use, tool string) bool {
	if u == nil || !lineage.IsID(u.CallID) {
		return false
	}
	v, err := h.b.Show(ctx, u.CallID)
	if err != nil || v.Node == nil {
		return false
	}
	return v.Node.Kind == lineage.KindCall && v.Node.Session == ev.SessionID && v.Node.Tool == tool
}

// subagentPrompt records the prompt of a call that starts a subagent
// (Task, Agent) as the agent's words, derived from the call (so from all
// the call derives from): the subagent's transcript begins with it as a
// user turn, which the hook then finds recorded in this session instead
// of recording it as text nobody vouches for. Text Claude Code adds to the
// prompt, or a prompt it does not send as is, still reads as unverified.
func (h *Handler) subagentPrompt(ctx context.Context, ev *Event, call string) error {
	var in struct {
		Prompt string `json:"prompt"`
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil || in.Prompt == "" {
		return nil
	}
	_, err := h.recordLabelled(ctx, h.m.Agent, lineage.KindToolOutput, ev.SessionID, []byte(in.Prompt), []lineage.Parent{{ID: call, Weight: 1}},
		fmt.Sprintf("the prompt of %s %s (what the agent asked a subagent)", ev.ToolName, clip(ev.ToolUseID)))
	return err
}

// recordWritten records what a Write or Edit left in the file: a memory
// entry the agent signs over the file's content, derived from base (the
// call) and, for an Edit, from where the content it changed came from.
func (h *Handler) recordWritten(ctx context.Context, ev *Event, o *origin, base []lineage.Parent) (*lineage.Node, error) {
	parents := slices.Clone(base)
	if o.edit {
		src, err := h.sourceOf(ctx, ev, o.before)
		if err != nil {
			return nil, err
		}
		parents = append(parents, src...)
	}
	s, err := h.signer(ctx, h.m.Agent)
	if err != nil {
		return nil, err
	}
	n, err := h.b.Record(ctx, s, pedigree.Entry{Principal: h.m.Agent, Kind: lineage.KindMemory, Session: ev.SessionID,
		Content: o.written, StoreContent: len(o.written) <= MaxStoredContent, Parents: dedupeParents(parents)})
	if err != nil {
		return nil, err
	}
	return n, h.state.label(n.ID, fmt.Sprintf("%s %s (what the agent wrote)", ev.ToolName, clip(filePath(ev))))
}

// sourceOf is where a file's content before an Edit came from: the agent's
// own earlier writes of it, or else an entry of that content signed by the
// principal the mapping gives a Read (it was on disk, of unknown origin).
func (h *Handler) sourceOf(ctx context.Context, ev *Event, before []byte) ([]lineage.Parent, error) {
	ids, err := h.ownContent(ctx, before)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		p, rule := h.vouched(filePath(ev), before)
		if p == "" {
			p, rule = h.m.Output("Read").Principal, "of unknown origin"
		}
		n, err := h.recordLabelled(ctx, p, lineage.KindToolOutput, ev.SessionID, before, []lineage.Parent{},
			fmt.Sprintf("%s before the %s: %s", clip(filePath(ev)), ev.ToolName, rule))
		if err != nil {
			return nil, err
		}
		ids = []string{n.ID}
	}
	out := make([]lineage.Parent, len(ids))
	for i, id := range ids {
		out[i] = lineage.Parent{ID: id, Weight: 1}
	}
	return out, nil
}

func dedupeParents(ps []lineage.Parent) []lineage.Parent {
	seen := map[string]bool{}
	out := ps[:0:0]
	for _, p := range ps {
		if !seen[p.ID] {
			seen[p.ID] = true
			out = append(out, p)
		}
	}
	return out
}

func filePath(ev *Event) string {
	var in struct {
		FilePath string `json:"file_path"`
	}
	json.Unmarshal(ev.ToolInput, &in)
	return in.FilePath
}

// writtenFile is the content a Write, Edit or MultiEdit left in its file,
// from the event alone: a Write's content; an Edit's original file with its
// replacements made, as Claude Code makes them (the first occurrence, or
// every one with replace_all). before is an Edit's original. An event it
// cannot read that way is not ok: its output is recorded as the mapping
// says.
func writtenFile(ev *Event) (after, before []byte, edit, ok bool) {
	type change struct {
		Old        *string `json:"old_string"`
		New        *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
	}
	var in struct {
		FilePath string   `json:"file_path"`
		Content  *string  `json:"content"`
		Edits    []change `json:"edits"`
		change
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil || in.FilePath == "" {
		return nil, nil, false, false
	}
	switch ev.ToolName {
	case "Write":
		if in.Content == nil {
			return nil, nil, false, false
		}
		return []byte(*in.Content), nil, false, true
	case "Edit":
		in.Edits = []change{in.change}
	}
	var out struct {
		OriginalFile *string `json:"originalFile"`
	}
	if json.Unmarshal(ev.ToolResponse, &out) != nil || out.OriginalFile == nil || len(in.Edits) == 0 {
		return nil, nil, false, false
	}
	text := *out.OriginalFile
	for _, c := range in.Edits {
		if c.Old == nil || c.New == nil || *c.Old == "" || !strings.Contains(text, *c.Old) {
			return nil, nil, false, false
		}
		if c.ReplaceAll {
			text = strings.ReplaceAll(text, *c.Old, *c.New)
		} else {
			text = strings.Replace(text, *c.Old, *c.New, 1)
		}
	}
	return []byte(text), []byte(*out.OriginalFile), true, true
}

// fileConfirmation is an MCP file server's confirmation of a write (see
// gateway.Confirmation): the tool's whole response is one text block made
// of the call's own arguments.
func fileConfirmation(ev *Event) (string, bool) {
	parts := strings.Split(ev.ToolName, "__")
	if len(parts) < 3 || parts[0] != "mcp" || ev.HookEventName != PostToolUse {
		return "", false
	}
	canon, err := lineage.CanonicalArgs(ev.ToolInput)
	if err != nil {
		return "", false
	}
	want := gateway.Confirmation(parts[len(parts)-1], canon)
	var blocks []map[string]any
	if want == "" || json.Unmarshal(ev.ToolResponse, &blocks) != nil || len(blocks) != 1 || len(blocks[0]) != 2 ||
		blocks[0]["type"] != "text" || blocks[0]["text"] != want {
		return "", false
	}
	return want, true
}

// readContent is a Read's whole file content: a Read of part of a file
// (offset, limit) matches nothing and is not ok.
func readContent(ev *Event) ([]byte, bool) {
	var r struct {
		Type string `json:"type"`
		File *struct {
			Content    *string `json:"content"`
			NumLines   int     `json:"numLines"`
			StartLine  int     `json:"startLine"`
			TotalLines int     `json:"totalLines"`
		} `json:"file"`
	}
	if json.Unmarshal(ev.ToolResponse, &r) != nil || r.Type != "text" || r.File == nil || r.File.Content == nil {
		return nil, false
	}
	if r.File.StartLine > 1 || r.File.NumLines < r.File.TotalLines {
		return nil, false
	}
	return []byte(*r.File.Content), true
}
