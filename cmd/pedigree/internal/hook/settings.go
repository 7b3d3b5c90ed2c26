package hook

import "encoding/json"

// Events are the hook events the settings register.
var Events = []string{UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure, SessionStart}

// TimeoutSeconds is the hook timeout written into the settings: the hook
// waits up to 5 s for a store another hook process holds, and a check
// takes milliseconds.
const TimeoutSeconds = 30

// Settings is the "hooks" block of Claude Code's settings.json.
type Settings struct {
	Hooks map[string][]Matcher `json:"hooks"`
}

// Matcher is one matcher group of a hook event.
type Matcher struct {
	Matcher string    `json:"matcher,omitempty"`
	Hooks   []Command `json:"hooks"`
}

// Command is one hook: a command, or an http endpoint.
type Command struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Timeout int               `json:"timeout"`
}

// CommandSettings runs command (already quoted for a shell) on every event.
// Claude Code goes on without a hook whose command fails with any code but
// 2, a missing binary's 127 included, so the command ends in "|| exit 2":
// whatever stops the hook from answering blocks.
func CommandSettings(command string) *Settings {
	return settings(Command{Type: "command", Command: command + " || exit 2", Timeout: TimeoutSeconds})
}

// HTTPSettings posts every event to url with the bearer token.
func HTTPSettings(url, token string) *Settings {
	return settings(Command{Type: "http", URL: url, Headers: map[string]string{"Authorization": "Bearer " + token}, Timeout: TimeoutSeconds})
}

func settings(c Command) *Settings {
	s := &Settings{Hooks: map[string][]Matcher{}}
	for _, ev := range Events {
		m := Matcher{Hooks: []Command{c}}
		if ev == PreToolUse || ev == PostToolUse || ev == PostToolUseFailure {
			m.Matcher = "*" // every tool, MCP tools included
		}
		s.Hooks[ev] = []Matcher{m}
	}
	return s
}

// JSON renders the block, indented, for pasting.
func (s *Settings) JSON() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}
