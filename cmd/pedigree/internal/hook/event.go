package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/pedigree-ai/pedigree/internal/safetext"
	"github.com/pedigree-ai/pedigree/lineage"
)

// The events the handler answers.
const (
	UserPromptSubmit = "UserPromptSubmit"
	PreToolUse       = "PreToolUse"
	PostToolUse      = "PostToolUse"
	// PostToolUseFailure carries a failed tool's error, whose text can come
	// from the same untrusted place as an output (a command's stderr).
	PostToolUseFailure = "PostToolUseFailure"
	SessionStart       = "SessionStart"
	SessionEnd         = "SessionEnd"
)

// ErrEvent is an event that cannot be handled: malformed, too large, of an
// unknown kind, or missing a field its kind needs.
var ErrEvent = errors.New("bad hook event")

// Event is one Claude Code hook event, as sent on a command hook's stdin or
// in an http hook's body. Fields Claude Code adds in later versions are
// ignored; the fields read here must have the right type.
type Event struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	CWD            string `json:"cwd"`
	PermissionMode string `json:"permission_mode"`
	HookEventName  string `json:"hook_event_name"`
	// UserPromptSubmit.
	Prompt *string `json:"prompt"`
	// PreToolUse and PostToolUse.
	ToolName     string          `json:"tool_name"`
	ToolInput    json.RawMessage `json:"tool_input"`
	ToolUseID    string          `json:"tool_use_id"`
	ToolResponse json.RawMessage `json:"tool_response"`
	// PostToolUseFailure.
	Error *string `json:"error"`
	// AgentID names the subagent whose event this is (its transcript is
	// its own: sync.go).
	AgentID string `json:"agent_id"`
	// SessionStart (startup, resume, clear, compact, fork) and SessionEnd.
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// The same pattern as lineage's sessions: a session ID is used as the
// pedigree session, verbatim, and never as a file name.
var sessionPat = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$`)

// ReadEvent reads one event of at most MaxEventBytes from r.
func ReadEvent(r io.Reader) (*Event, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxEventBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading it: %v", ErrEvent, err)
	}
	return ParseEvent(b)
}

// ParseEvent decodes and checks one event.
func ParseEvent(b []byte) (*Event, error) {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrEvent}, a...)...) }
	if len(b) > MaxEventBytes {
		return nil, bad("larger than %d bytes", MaxEventBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var ev Event
	if err := dec.Decode(&ev); err != nil {
		return nil, bad("not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("trailing data after the JSON object")
	}
	if len(ev.SessionID) > lineage.MaxSessionLen || !sessionPat.MatchString(ev.SessionID) {
		return nil, bad("session_id %q: want up to %d of [A-Za-z0-9._:@/+-], starting with a letter or digit", clip(ev.SessionID), lineage.MaxSessionLen)
	}
	switch ev.HookEventName {
	case UserPromptSubmit:
		if ev.Prompt == nil {
			return nil, bad("UserPromptSubmit without a prompt")
		}
	case PreToolUse, PostToolUse, PostToolUseFailure:
		if ev.ToolName == "" {
			return nil, bad("%s without a tool_name", ev.HookEventName)
		}
		if len(ev.ToolName) > lineage.MaxToolLen || !toolPat.MatchString(ev.ToolName) {
			return nil, bad("tool_name %q: want up to %d of [A-Za-z0-9._:-]", clip(ev.ToolName), lineage.MaxToolLen)
		}
		if len(ev.ToolUseID) > MaxToolUseID {
			return nil, bad("tool_use_id longer than %d bytes", MaxToolUseID)
		}
		if isNull(ev.ToolInput) {
			ev.ToolInput = json.RawMessage("{}")
		} else if ev.ToolInput[0] != '{' {
			return nil, bad("tool_input is not a JSON object")
		}
		if ev.HookEventName == PostToolUse && isNull(ev.ToolResponse) {
			return nil, bad("PostToolUse without a tool_response")
		}
		if ev.HookEventName == PostToolUseFailure && ev.Error == nil {
			return nil, bad("PostToolUseFailure without an error")
		}
	case SessionStart, SessionEnd:
	case "":
		return nil, bad("no hook_event_name")
	default:
		return nil, bad("unknown hook_event_name %q", clip(ev.HookEventName))
	}
	return &ev, nil
}

var toolPat = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

func isNull(m json.RawMessage) bool { return len(m) == 0 || string(m) == "null" }

// clip shortens what is quoted back from bad input, on a character
// boundary.
func clip(s string) string {
	if c, left := safetext.Clip(s, 80); left > 0 {
		return c + "…"
	}
	return s
}
