package hook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safetext"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Answer is what the hook prints (or an http hook returns). A nil Answer
// prints nothing: Claude Code goes on as it would without the hook.
type Answer struct {
	HookSpecificOutput *Specific `json:"hookSpecificOutput,omitempty"`
	// Decision "block" with Reason stops a prompt, or tells Claude that a
	// tool's result could not be recorded.
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Continue false with StopReason stops Claude Code altogether (an
	// http hook's answer to an event it cannot read).
	Continue   *bool  `json:"continue,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
}

// Specific is a PreToolUse's permission decision.
type Specific struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
}

// Handler answers events for one data directory.
type Handler struct {
	b       pedigree.Harness
	byRef   bool // b names a session's context by reference (pedigree.ContextReferrer)
	m       *Mapping
	dir     string
	state   *State
	mu      sync.Mutex
	signers map[string]*registry.Signer
	log     *slog.Logger
	// forkWait bounds a PreToolUse's wait for an inheriting session's
	// transcript (sync.go); now is the clock a SessionStart is marked by.
	forkWait time.Duration
	now      func() time.Time
}

// New makes a handler for the data directory dir (absolute: it is quoted
// in the commands that the answers suggest), reading its mapping as the
// operator sealed it.
func New(ctx context.Context, b pedigree.Harness, dir string) (*Handler, error) {
	view, err := b.Registry(ctx)
	if err != nil {
		return nil, err
	}
	m, err := loadSealedMapping(dir, view)
	if err != nil {
		return nil, err
	}
	state := NewState(filepath.Join(dir, StateDir))
	_, byRef := b.(pedigree.ContextReferrer)
	return &Handler{b: indexing{b, state}, byRef: byRef, m: m, dir: dir, state: state, signers: map[string]*registry.Signer{}, log: slog.Default(), forkWait: forkWait, now: time.Now}, nil
}

// Handle answers one event. An error means the event must be blocked.
func (h *Handler) Handle(ctx context.Context, ev *Event) (*Answer, error) {
	switch ev.HookEventName {
	case UserPromptSubmit:
		// The prompt first: a transcript that already holds it then finds
		// it recorded as the person's (sync.go).
		if err := h.prompt(ctx, ev); err != nil {
			return nil, err
		}
		if err := h.mcpMetadata(ctx, ev); err != nil {
			return nil, err
		}
		return nil, h.transcript(ctx, ev)
	case PreToolUse:
		// What the transcript gained since the last event: the model was
		// sent it before it proposed this call.
		if err := h.transcript(ctx, ev); err != nil {
			return nil, err
		}
		// The MCP servers' metadata, which no event or transcript line
		// carries (mcpseen.go).
		if err := h.mcpMetadata(ctx, ev); err != nil {
			return nil, err
		}
		// A skill the model runs: its text, when nobody vouches for it,
		// before the call is judged (slash.go).
		if ev.ToolName == "Skill" {
			var in struct {
				Skill string `json:"skill"`
			}
			if json.Unmarshal(ev.ToolInput, &in) == nil && typedCommand.MatchString("/"+in.Skill) {
				if err := h.unvouchedCommand(ctx, ev, in.Skill, "run by the model"); err != nil {
					return nil, err
				}
			}
		}
		return h.pre(ctx, ev)
	case PostToolUse, PostToolUseFailure:
		err := h.post(ctx, ev)
		if err != nil {
			h.state.MarkUnrecorded(ev.SessionID, fmt.Sprintf("the result of %s (tool_use_id %s) was not recorded: %v", ev.ToolName, clip(ev.ToolUseID), err))
		}
		return nil, err
	case SessionStart:
		// A session that starts from an earlier conversation is marked
		// first (sync.go): SessionStart is the one event Claude Code does
		// not stop for, so a mark must not hang on what could fail after.
		started := h.now()
		if ev.Source == "fork" || ev.Source == "resume" {
			if err := h.state.markInherits(ev.SessionID, ev.Source, started); err != nil {
				return nil, err
			}
		}
		// A resumed session keeps its ID and its context in the store:
		// nothing is recorded again. Its transcript is read again whole
		// at the next event, as the model is sent it whole (sync.go).
		if err := h.state.forgetReads(ev.SessionID); err != nil {
			return nil, err
		}
		if ev.Source == "resume" {
			// Resumed under an ID the store holds a context of: the hook
			// recorded that conversation, and the mark goes.
			ids, err := h.b.Context(ctx, ev.SessionID)
			if err != nil {
				return nil, err
			}
			if len(ids) > 0 {
				return nil, h.state.settled(ev.SessionID)
			}
		}
		return nil, nil
	case SessionEnd:
		return nil, nil
	}
	return nil, fmt.Errorf("%w: unknown hook_event_name %q", ErrEvent, ev.HookEventName)
}

// Block is the answer that stops what an event was about, for an http hook
// (a command hook exits 2 instead): Claude Code lets anything through on an
// http hook's error, so errors are answered, never returned.
func Block(ev *Event, err error) *Answer {
	reason := safetext.Message("pedigree: "+err.Error(), 0)
	switch {
	case ev != nil && ev.HookEventName == PreToolUse:
		return &Answer{HookSpecificOutput: &Specific{HookEventName: PreToolUse, PermissionDecision: string(gate.Deny), PermissionDecisionReason: reason}}
	case ev != nil && (ev.HookEventName == UserPromptSubmit || ev.HookEventName == PostToolUse || ev.HookEventName == PostToolUseFailure):
		return &Answer{Decision: "block", Reason: reason}
	}
	f := false
	return &Answer{Continue: &f, StopReason: reason}
}

func (h *Handler) prompt(ctx context.Context, ev *Event) error {
	s, err := h.signer(ctx, h.m.User)
	if err != nil {
		return err
	}
	content := []byte(*ev.Prompt)
	if _, err = h.b.Record(ctx, s, pedigree.Entry{
		Principal: h.m.User, Kind: lineage.KindPrompt, Session: ev.SessionID,
		Content: content, Parents: []lineage.Parent{}, StoreContent: len(content) <= MaxStoredContent,
	}); err != nil {
		return err
	}
	if m := typedCommand.FindStringSubmatch(strings.TrimSpace(*ev.Prompt)); m != nil {
		if err := h.unvouchedCommand(ctx, ev, m[1], "typed"); err != nil {
			return err
		}
	}
	if c := canonicalCommand(*ev.Prompt); c != "" && c != *ev.Prompt {
		// A slash command typed with other spacing: its tags say it
		// trimmed (slash.go), and are the same prompt.
		if _, err = h.b.Record(ctx, s, pedigree.Entry{
			Principal: h.m.User, Kind: lineage.KindPrompt, Session: ev.SessionID,
			Content: []byte(c), Parents: []lineage.Parent{}, StoreContent: len(c) <= MaxStoredContent,
		}); err != nil {
			return err
		}
	}
	return h.mentions(ctx, ev)
}

// mentionPat finds @-mentions: Claude Code puts a mentioned file's content
// (or an MCP resource, @server:uri) into the context along with the prompt,
// without a tool call, so no PostToolUse would ever record it.
// A name with a space is quoted (@"NOTES 2.md", as Claude Code's file
// picker inserts it); a line range follows a file's name (@NOTES.md#L1-2).
var mentionPat = regexp.MustCompile(`(?:^|\s)@(?:"([^"\n]+)"|([^\s"'<>]+))`)

// rangePat is a mention's line range, which loads part of the file: the
// whole file is recorded.
var rangePat = regexp.MustCompile(`#L[0-9]+(?:-[0-9]+)?$`)

// mentions records what a prompt's @-mentions bring in, each signed as the
// tool that would have read it: a file by the Read tool's principal, an MCP
// resource by the MCP principal. A mention that names nothing is text.
func (h *Handler) mentions(ctx context.Context, ev *Event) error {
	found := mentionPat.FindAllStringSubmatch(*ev.Prompt, -1)
	if len(found) > maxMentions {
		return fmt.Errorf("%w: the prompt has %d @-mentions, more than the %d the hook records", ErrEvent, len(found), maxMentions)
	}
	for _, m := range found {
		ref := m[1]
		if ref == "" {
			ref = strings.TrimRight(m[2], ".,;:!?)]}")
		}
		var principal string
		var content []byte
		if server, _, ok := strings.Cut(ref, ":"); ok && m[1] == "" && server != "" && !strings.ContainsAny(server, "/\\.~") {
			principal, content = h.m.MCP.Principal, []byte(ref)
		} else {
			path := rangePat.ReplaceAllString(ref, "")
			if strings.HasPrefix(path, "~/") {
				home, err := os.UserHomeDir()
				if err != nil {
					continue
				}
				path = filepath.Join(home, path[2:])
			} else if !filepath.IsAbs(path) {
				if ev.CWD == "" {
					continue
				}
				path = filepath.Join(ev.CWD, path)
			}
			fi, err := os.Stat(path)
			if err != nil {
				continue // not a file: the mention is text
			}
			principal, content = h.m.Output("Read").Principal, []byte(path)
			if fi.Mode().IsRegular() {
				f, err := os.Open(path)
				if err != nil {
					return fmt.Errorf("reading the mentioned %s: %w", clip(ref), err)
				}
				content, err = io.ReadAll(io.LimitReader(f, MaxEventBytes))
				f.Close()
				if err != nil {
					return fmt.Errorf("reading the mentioned %s: %w", clip(ref), err)
				}
				if p, _ := h.vouched(path, content); p != "" {
					principal = p
				}
			}
		}
		if principal == "" {
			continue
		}
		if _, err := h.recordLabelled(ctx, principal, lineage.KindToolOutput, ev.SessionID, content, []lineage.Parent{},
			"@"+clip(ref)+" (mentioned in the prompt)"); err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) pre(ctx context.Context, ev *Event) (*Answer, error) {
	if why := h.state.Unrecorded(ev.SessionID); why != "" {
		return deny(fmt.Sprintf("pedigree: this session's context is incomplete (%s), so no call in it can be checked. Start a new session, or remove %s to go on with what was recorded.", why, ShellQuote(h.state.unrecordedPath(ev.SessionID)))), nil
	}
	s, err := h.signer(ctx, h.m.Agent)
	if err != nil {
		return nil, err
	}
	args, err := boundArgs(ev.ToolInput)
	if err != nil {
		return nil, err
	}
	// The session's whole context: named by reference when the backend can
	// (the engine, or a server's client: pedigree.ContextReferrer), so the
	// call and its decision do not grow with the session; otherwise listed,
	// with rollups once it is long.
	var just []string
	if !h.byRef {
		if just, err = h.justification(ctx, ev.SessionID); err != nil {
			return nil, err
		}
	}
	d, err := h.b.Check(ctx, s, pedigree.Call{Principal: h.m.Agent, Session: ev.SessionID, Tool: checkedTool(ev), Args: args, Justification: just})
	if err != nil {
		return nil, err
	}
	if err := h.state.Put(&Use{Session: ev.SessionID, ToolUseID: ev.ToolUseID, Tool: ev.ToolName, CallID: d.CallID, DecisionID: d.ID, Decision: d.Decision}); err != nil {
		return nil, err
	}
	if (ev.ToolName == "Task" || ev.ToolName == "Agent") && d.Decision != gate.Deny {
		if err := h.subagentPrompt(ctx, ev, d.CallID); err != nil {
			return nil, err
		}
	}
	if name, ok := h.m.gatewayTool(ev.ToolName); ok && d.Decision != gate.Deny {
		if err := h.bind(ev, name); err != nil {
			return nil, err
		}
	}
	switch d.Decision {
	case gate.Allow:
		if !h.m.AllowClean {
			return nil, nil
		}
		return &Answer{HookSpecificOutput: &Specific{HookEventName: PreToolUse, PermissionDecision: string(gate.Allow),
			PermissionDecisionReason: safetext.Message(fmt.Sprintf("pedigree allows %s: %s (decision %s)", ev.ToolName, strings.Join(d.Reasons, "; "), short(d.ID)), 0)}}, nil
	case gate.Deny:
		return deny(h.reason(ev, d)), nil
	case gate.Ask:
		return &Answer{HookSpecificOutput: &Specific{HookEventName: PreToolUse, PermissionDecision: string(gate.Ask), PermissionDecisionReason: h.ask(ctx, ev, d, args)}}, nil
	}
	return nil, fmt.Errorf("the gate answered %q", d.Decision)
}

func deny(reason string) *Answer {
	return &Answer{HookSpecificOutput: &Specific{HookEventName: PreToolUse, PermissionDecision: string(gate.Deny), PermissionDecisionReason: safetext.Message(reason, 0)}}
}

// ask is the reason of an ask as the person reads it in Claude Code's
// prompt: one sentence on what the call would do and what it followed, then
// the call's exact view (every protected argument whole and first, with
// where it came from; gate.Pending.View).
func (h *Handler) ask(ctx context.Context, ev *Event, d *gate.Decision, args []byte) string {
	p, err := h.b.Subject(ctx, d.ID)
	if err != nil {
		// Without the logged evidence every argument is shown whole.
		h.log.Warn("pedigree hook: the decision's evidence could not be read for the ask", "decision", d.ID, "error", err)
		p = &gate.Pending{DecisionID: d.ID, Decision: d.Decision, Tool: d.Tool, Args: args}
	}
	lines, escaped := p.View()
	tool, n := safetext.Escape(ev.ToolName, safetext.Line)
	var b strings.Builder
	b.WriteString(safetext.Message(h.reason(ev, d), 0))
	fmt.Fprintf(&b, "\nThe call, exactly: %s with:", tool)
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	if note := safetext.Note(escaped + n); note != "" {
		b.WriteString("\n" + note)
	}
	return b.String()
}

// reason says what the call relied on, where it came from, and what the
// person can do about it.
func (h *Handler) reason(ev *Event, d *gate.Decision) string {
	var b strings.Builder
	if d.Decision == gate.Ask {
		fmt.Fprintf(&b, "pedigree asks before this %s call %s", ev.ToolName, action(ev))
	} else {
		fmt.Fprintf(&b, "pedigree denied this %s call, which %s", ev.ToolName, action(ev))
	}
	if len(d.Untrusted) == 0 {
		why := make([]string, len(d.Reasons))
		for i, r := range d.Reasons {
			why[i] = ruleless(r)
		}
		b.WriteString(": " + strings.Join(why, "; "))
	} else {
		b.WriteString(": it follows content from ")
		for i, src := range d.Untrusted {
			if i == maxReasonSources {
				fmt.Fprintf(&b, " and %d more", len(d.Untrusted)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			if what := h.describe(src.ID); what != "" {
				fmt.Fprintf(&b, "%s (%s, %s tier, entry %s)", what, src.Principal, src.Tier, short(src.ID))
			} else {
				fmt.Fprintf(&b, "%s (%s tier, entry %s)", src.Principal, src.Tier, short(src.ID))
			}
		}
		b.WriteString(", which may have steered it")
	}
	fmt.Fprintf(&b, ". Decision %s.", short(d.ID))
	user := h.m.Principals[h.m.User]
	if d.Decision == gate.Ask {
		fmt.Fprintf(&b, " Allowing it here is recorded as %s's approval.", h.m.User)
	} else {
		fmt.Fprintf(&b, " If you trust that source, approve this exact call once with: pedigree --dir %s gate approve %s --as %s --key %s, then ask Claude to retry.",
			ShellQuote(h.dir), d.ID, h.m.User, ShellQuote(filepath.Join(h.dir, user.Key)))
	}
	fmt.Fprintf(&b, " Why: pedigree --dir %s lineage trace %s; or see it drawn, and decide, on a page: pedigree --dir %s ui --decision %s",
		ShellQuote(h.dir), short(d.CallID), ShellQuote(h.dir), short(d.ID))
	return b.String()
}

func (h *Handler) post(ctx context.Context, ev *Event) error {
	out := h.m.Output(ev.ToolName)
	if out.Skip {
		return nil
	}
	u, err := h.state.Get(ev.SessionID, ev.ToolUseID)
	if err != nil {
		return err
	}
	content := []byte(ev.ToolResponse)
	if ev.HookEventName == PostToolUseFailure {
		content = []byte(*ev.Error)
	}
	o, err := h.origin(ctx, ev, u, out.Principal)
	if err != nil {
		return err
	}
	if u != nil && h.recorded(ctx, ev, u.Output, o.principal, content) {
		return nil // delivered twice: recorded once
	}
	if u == nil {
		u = &Use{Session: ev.SessionID, ToolUseID: ev.ToolUseID, Tool: ev.ToolName}
	}
	if u.Decision == gate.Ask && ev.PermissionMode != "bypassPermissions" && ev.HookEventName == PostToolUse {
		// Claude Code asked the person, who let the call run: that is the
		// user's approval, and the log should say so.
		if err := h.approve(ctx, ev, u); err != nil {
			return err
		}
	}
	if name, ok := h.m.gatewayTool(ev.ToolName); ok && ev.HookEventName == PostToolUse {
		if id := h.gatewayOutput(ctx, ev, name); id != "" {
			// The gateway recorded this result in this session, with its
			// own provenance: one record (gateway.go).
			u.Output = id
			if err := h.state.Put(u); err != nil {
				return err
			}
			return h.state.describeOutput(id, ev, "recorded by the gateway")
		}
	}
	s, err := h.signer(ctx, o.principal)
	if err != nil {
		return err
	}
	base, err := h.callParents(ctx, ev, u)
	if err != nil {
		return err
	}
	if o.written != nil {
		w, err := h.recordWritten(ctx, ev, o, base)
		if err != nil {
			return err
		}
		o.parents = append(o.parents, lineage.Parent{ID: w.ID, Weight: 1})
	}
	if o.items != nil {
		ps, err := h.recordItems(ctx, ev, o.items, base)
		if err != nil {
			return err
		}
		o.parents = append(o.parents, ps...)
	}
	n, err := h.b.Record(ctx, s, pedigree.Entry{Principal: o.principal, Kind: lineage.KindToolOutput, Session: ev.SessionID,
		Content: content, StoreContent: len(content) <= MaxStoredContent, Parents: dedupeParents(append(base, o.parents...))})
	if err != nil {
		return err
	}
	u.Output = n.ID
	if err := h.state.Put(u); err != nil {
		return err
	}
	return h.state.describeOutput(n.ID, ev, o.rule)
}

// callParents is what a tool use's output derives from: its call, when the
// store holds it, else everything the session held (the hook was installed
// mid-session, or the call failed closed before it was stored).
func (h *Handler) callParents(ctx context.Context, ev *Event, u *Use) ([]lineage.Parent, error) {
	if lineage.IsID(u.CallID) {
		if v, err := h.b.Show(ctx, u.CallID); err == nil && v.Node != nil && v.Node.Kind == lineage.KindCall && v.Node.Session == ev.SessionID {
			return []lineage.Parent{{ID: u.CallID, Weight: 1}}, nil
		}
	}
	return h.contextParents(ctx, ev.SessionID)
}

// recorded says whether the store holds id as this very output already: a
// tool_output entry whose signature verifies, signed by principal, in the
// event's session (so in its context), over content. The state file only
// names the entry (anyone who can write the data directory can edit it):
// a name the store does not vouch for is recorded again, since a duplicate
// output entry is harmless and a missing one is not.
func (h *Handler) recorded(ctx context.Context, ev *Event, id, principal string, content []byte) bool {
	if !lineage.IsID(id) {
		return false
	}
	v, err := h.b.Show(ctx, id)
	if err != nil || v.SignatureError != "" || v.Node == nil {
		return false
	}
	n := v.Node
	if n.ID != id || n.Kind != lineage.KindToolOutput || n.Session != ev.SessionID || n.Principal != principal {
		return false
	}
	st, _, _, err := lineage.Open(v.Envelope)
	return err == nil && st.Kind == lineage.KindToolOutput && st.Session == ev.SessionID && st.Principal == principal &&
		st.ContentDigest == lineage.DigestContent(content)
}

// approve records the user's approval of an asked call that then ran
// (only a PostToolUse counts: a failure event may follow a refusal), and
// uses it at once on the same call (same tool, arguments, session and
// justification), so that the log holds an allow that names the approver
// and no unused approval is left behind.
//
// The state file only names the decision: anyone who can write the data
// directory can edit it. The decision is read from the backend, and nothing
// is signed unless it is an ask by the hook's agent in this session, of
// this tool with these arguments (the call PreToolUse checked); an
// approval the store refuses (the decision is already approved or
// rejected) is not retried. Either way the output is still recorded.
func (h *Handler) approve(ctx context.Context, ev *Event, u *Use) error {
	args, err := boundArgs(ev.ToolInput)
	if err != nil {
		return err
	}
	asked, why := h.asked(ctx, ev, u.DecisionID, args)
	if why != "" {
		h.log.Warn("pedigree hook: no approval signed for a tool use that ran", "session", ev.SessionID, "tool_use_id", ev.ToolUseID, "tool", ev.ToolName, "decision", u.DecisionID, "why", why)
		u.Decision = ""
		return nil
	}
	s, err := h.signer(ctx, h.m.User)
	if err != nil {
		return err
	}
	a, err := h.b.Approve(ctx, s, h.m.User, asked.ID, 0)
	if errors.Is(err, gate.ErrApproval) || errors.Is(err, gate.ErrRejected) {
		h.log.Warn("pedigree hook: the approval of a tool use that ran was refused", "session", ev.SessionID, "tool_use_id", ev.ToolUseID, "tool", ev.ToolName, "decision", asked.ID, "error", err)
		u.Decision = ""
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording %s's approval of decision %s: %w", h.m.User, short(asked.ID), err)
	}
	u.Approval = a.ID
	agent, err := h.signer(ctx, h.m.Agent)
	if err != nil {
		return err
	}
	// The call is made again on what the asked one relied on. One that
	// named its session's context by reference (every call of the hook's
	// through the engine or a server) is made on the context as it is now,
	// which holds that prefix: the engine checks that the approved
	// justification, expanded, is within the new call's.
	just := asked.Justification
	if asked.Context != nil {
		just = nil
	}
	d, err := h.b.Check(ctx, agent, pedigree.Call{Principal: h.m.Agent, Session: ev.SessionID, Tool: ev.ToolName, Args: args, Justification: just})
	if err != nil {
		return err
	}
	if d.Decision == gate.Allow && d.Approval == a.ID {
		u.CallID, u.DecisionID, u.Decision = d.CallID, d.ID, d.Decision
	}
	return nil
}

// asked is the logged decision id if it is the ask PreToolUse got for this
// tool use: by the hook's agent, in the event's session, on the event's tool
// and arguments (args, as bound for Check). Otherwise it says why not.
func (h *Handler) asked(ctx context.Context, ev *Event, id string, args []byte) (*gate.Decision, string) {
	if !lineage.IsID(id) {
		return nil, fmt.Sprintf("the state names %q, not a decision ID", clip(id))
	}
	d, err := h.b.Decision(ctx, id)
	if err != nil {
		return nil, fmt.Sprintf("decision %s: %v", short(id), err)
	}
	canon, err := lineage.CanonicalArgs(args)
	if err != nil {
		return nil, fmt.Sprintf("tool_input: %v", err)
	}
	switch {
	case d.ID != id:
		return nil, fmt.Sprintf("the log answered decision %s for %s", short(d.ID), short(id))
	case d.Decision != gate.Ask:
		return nil, fmt.Sprintf("decision %s is %s, not ask", short(id), d.Decision)
	case d.Approval != "":
		return nil, fmt.Sprintf("decision %s was already allowed by approval %s", short(id), short(d.Approval))
	case d.Principal != h.m.Agent:
		return nil, fmt.Sprintf("decision %s is on a call by %s, not %s", short(id), d.Principal, h.m.Agent)
	case d.Session != ev.SessionID:
		return nil, fmt.Sprintf("decision %s was made in another session", short(id))
	case d.Tool != ev.ToolName:
		return nil, fmt.Sprintf("decision %s is on %s, not %s", short(id), clip(d.Tool), clip(ev.ToolName))
	case d.ArgsDigest != lineage.ActionDigest(ev.ToolName, canon):
		return nil, fmt.Sprintf("decision %s is on other arguments", short(id))
	}
	return d, ""
}

func (h *Handler) contextParents(ctx context.Context, session string) ([]lineage.Parent, error) {
	ids, err := h.justification(ctx, session)
	if err != nil {
		return nil, err
	}
	ps := make([]lineage.Parent, 0, len(ids))
	for _, id := range ids {
		ps = append(ps, lineage.Parent{ID: id, Weight: 1})
	}
	return ps, nil
}

// signer loads a principal's key from the data directory and checks it is
// the key and tier the frozen registry holds for that principal.
func (h *Handler) signer(ctx context.Context, id string) (*registry.Signer, error) {
	h.mu.Lock()
	s := h.signers[id]
	h.mu.Unlock()
	if s != nil {
		return s, nil
	}
	p, ok := h.m.Principals[id]
	if !ok {
		return nil, fmt.Errorf("%s: %s is not among its principals", MappingFile, id)
	}
	view, err := h.b.Registry(ctx)
	if err != nil {
		return nil, err
	}
	if !view.Frozen {
		return nil, fmt.Errorf("%w: run 'pedigree registry freeze' after 'pedigree hook claude init'", registry.ErrNotFrozen)
	}
	reg, ok := view.Lookup(id)
	if !ok {
		return nil, fmt.Errorf("%w %q: the mapping names a principal the registry does not hold", registry.ErrUnknownPrincipal, id)
	}
	if reg.Tier.String() != p.Tier {
		return nil, fmt.Errorf("%s: %s is registered as %s, not %s", MappingFile, id, reg.Tier, p.Tier)
	}
	s, err = registry.LoadSigner(filepath.Join(h.dir, p.Key))
	if err != nil {
		return nil, err
	}
	if !s.Public().Equal(reg.PublicKey) {
		return nil, fmt.Errorf("%w: %s is not the key registered for %s", registry.ErrBadKey, p.Key, id)
	}
	h.mu.Lock()
	h.signers[id] = s
	h.mu.Unlock()
	return s, nil
}

// boundArgs keeps a call's arguments under MaxArgsBytes by replacing long
// string values with their digests, so that a Write of a large file is
// still checked (and an approval still binds its exact content).
func boundArgs(raw json.RawMessage) ([]byte, error) {
	if len(raw) <= MaxArgsBytes {
		return raw, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: tool_input: %v", ErrEvent, err)
	}
	b, err := json.Marshal(shrink(v))
	if err != nil {
		return nil, err
	}
	if len(b) > lineage.MaxArgsBytes {
		return nil, fmt.Errorf("%w: tool_input is %d bytes even with its long values digested", ErrEvent, len(b))
	}
	return b, nil
}

func shrink(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) > maxArgString {
			sum := sha256.Sum256([]byte(x))
			return fmt.Sprintf("sha256:%s (%d bytes)", hex.EncodeToString(sum[:]), len(x))
		}
	case map[string]any:
		for k, e := range x {
			x[k] = shrink(e)
		}
	case []any:
		for i, e := range x {
			x[i] = shrink(e)
		}
	}
	return v
}

// describeOutput keeps a line saying which tool use an output entry came
// from, for the reasons of later decisions. It only ever labels.
func (s *State) describeOutput(id string, ev *Event, rule string) error {
	what := ev.ToolName
	var in map[string]any
	if json.Unmarshal(ev.ToolInput, &in) == nil {
		for _, k := range []string{"url", "file_path", "path", "command", "pattern", "query"} {
			if v, ok := in[k].(string); ok {
				what += " " + clip(v)
				break
			}
		}
	}
	if rule != "" {
		what += ": " + rule
	}
	return s.label(id, what)
}

// recordLabelled records content in session as principal's entry of kind
// with parents (its content stored when small), and labels it with what a
// person is told it is.
func (h *Handler) recordLabelled(ctx context.Context, principal string, kind lineage.Kind, session string, content []byte, parents []lineage.Parent, label string) (*lineage.Node, error) {
	s, err := h.signer(ctx, principal)
	if err != nil {
		return nil, err
	}
	n, err := h.b.Record(ctx, s, pedigree.Entry{Principal: principal, Kind: kind, Session: session,
		Content: content, Parents: parents, StoreContent: len(content) <= MaxStoredContent})
	if err != nil {
		return nil, err
	}
	return n, h.state.label(n.ID, label)
}

func (s *State) label(id, what string) error {
	return s.write(filepath.Join(s.dir, "outputs", id), []byte(what))
}

// describe is the label of an output entry, or "".
func (h *Handler) describe(id string) string {
	if !lineage.IsID(id) {
		return ""
	}
	b, err := h.state.read(filepath.Join(h.state.dir, "outputs", id))
	if err != nil {
		return ""
	}
	return strings.ToValidUTF8(string(b), "?")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ShellQuote quotes a path for a command a person pastes.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
