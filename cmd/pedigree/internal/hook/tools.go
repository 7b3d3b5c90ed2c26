package hook

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Claude Code 2.1's tools whose effect depends on their input: the hook
// checks such a call under a name of its own when the input makes it
// reach past the hooks' sight, so that DefaultCatalog can weigh it apart.
const (
	// RemoteAgent is an Agent call whose subagent runs in the cloud (its
	// isolation, or its agent definition's, is "remote"), with the prompt
	// it is given, out of the hooks' sight.
	RemoteAgent = "Agent:remote"
	// AssignedTaskCreate and AssignedTaskUpdate are task calls that name
	// an owner: Claude Code posts the task's subject and description to
	// that teammate's mailbox, as SendMessage does.
	AssignedTaskCreate = "TaskCreate:owner"
	AssignedTaskUpdate = "TaskUpdate:owner"
)

// builtinAgents are the subagent types Claude Code 2.1.332 defines itself
// ("" is general-purpose), none of them remote. A definition file of the
// same name is read first.
var builtinAgents = []string{"", "general-purpose", "Explore", "Plan", "claude", "statusline-setup", "fork"}

// checkedTool is the name a call is checked under: its own, but for the
// calls above. An input the hook cannot read plainly (a key in another
// case beside the real one, a value of another type) is taken at its
// most reaching, as what Claude Code makes of it is not known.
func checkedTool(ev *Event) string {
	if ev.ToolName != "Agent" && ev.ToolName != "TaskCreate" && ev.ToolName != "TaskUpdate" {
		return ev.ToolName // the input is not read on every other call
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(ev.ToolInput, &in) != nil {
		in = nil
	}
	switch {
	case ev.ToolName == "Agent" && (in == nil || agentRemote(ev.CWD, in)):
		return RemoteAgent
	case ev.ToolName != "Agent" && (in == nil || has(in, "owner")):
		return ev.ToolName + ":owner"
	}
	return ev.ToolName
}

// has says the input names key (in any case: Go's decoder, and perhaps
// the client's, would read it) with a value other than null or "".
func has(in map[string]json.RawMessage, key string) bool {
	for k, v := range in {
		if strings.EqualFold(k, key) && string(v) != "null" && string(v) != `""` {
			return true
		}
	}
	return false
}

// agentRemote says an Agent call's subagent may run remotely: its input's
// isolation is "remote" or unreadable, or it gives none and the agent
// definition it names says remote, cannot be read, or is not found among
// the files the hook can read (a plugin's agent, say) nor built in.
func agentRemote(cwd string, in map[string]json.RawMessage) bool {
	var iso, kind string
	for k, v := range in {
		switch {
		case k == "isolation":
			if json.Unmarshal(v, &iso) != nil {
				return true
			}
		case strings.EqualFold(k, "isolation"):
			return true // two spellings: which one the client reads is not known
		}
	}
	if iso != "" {
		return iso != "worktree"
	}
	if v, ok := in["subagent_type"]; ok && json.Unmarshal(v, &kind) != nil {
		return true
	}
	found := false
	for _, f := range agentFiles(cwd) {
		doc, err := readMCPConfig(f.File)
		if err != nil {
			return true
		}
		fm, err := agentFrontmatter(doc)
		if err != nil {
			return true
		}
		name := strings.TrimSuffix(filepath.Base(f.File), ".md")
		if v, ok := fm["name"]; ok && json.Unmarshal(v, &name) != nil {
			return true
		}
		if name != kind {
			continue
		}
		found = true
		var diso string
		if v, ok := fm["isolation"]; ok && string(v) != "null" && (json.Unmarshal(v, &diso) != nil || diso != "worktree") {
			return true
		}
	}
	return !found && !slices.Contains(builtinAgents, kind)
}

// taskEchoed reports whether a TaskCreate or TaskUpdate result, as the
// PostToolUse event carries it (measured with 2.1.332), only echoes the
// call: a created task whose subject and description are the call's, or
// an update of the call's task that succeeded, naming nothing but the
// fields it changed. Claude Code shows the model "Task #1 created
// successfully: SUBJECT" or "Updated task #1 status" for these, and the
// transcript keeps the same JSON beside that text (toolUseResult), so the
// transcript's copy is found recorded. Anything else (a task hook's
// blocking text, an error, a field the hook does not know) is the tool's
// output, recorded as such.
func taskEchoed(tool string, input, response json.RawMessage) bool {
	var in map[string]json.RawMessage
	if json.Unmarshal(input, &in) != nil {
		return false
	}
	switch tool {
	case "TaskCreate":
		r, ok := exactly(response, "task")
		if !ok {
			return false
		}
		task, ok := exactly(r["task"], "id", "subject", "description")
		var id, subject, desc, inSubject, inDesc string
		return ok && str(task["id"], &id) && str(task["subject"], &subject) && str(task["description"], &desc) &&
			str(in["subject"], &inSubject) && str(in["description"], &inDesc) &&
			taskID.MatchString(id) && subject == inSubject && desc == inDesc && !strings.ContainsAny(subject, "\r\n")
	case "TaskUpdate":
		r, ok := exactly(response, "success", "taskId", "updatedFields", "statusChange")
		var id, inID string
		var fields []string
		if !ok || string(r["success"]) != "true" || !str(r["taskId"], &id) || !str(in["taskId"], &inID) || id != inID || !taskID.MatchString(id) ||
			json.Unmarshal(r["updatedFields"], &fields) != nil {
			return false
		}
		for _, f := range fields {
			if !slices.Contains(taskFields, f) {
				return false
			}
		}
		if c, ok := r["statusChange"]; ok {
			ch, ok := exactly(c, "from", "to")
			var from, to string
			return ok && str(ch["from"], &from) && str(ch["to"], &to) && slices.Contains(taskStatuses, from) && slices.Contains(taskStatuses, to)
		}
		return true
	}
	return false
}

var taskID = regexp.MustCompile(`^[0-9]{1,9}$`)

// taskFields are the fields an update may name in its echo.
var taskFields = []string{"subject", "description", "activeForm", "status", "blocks", "blockedBy", "owner", "metadata"}

// taskStatuses are the statuses a task moves between.
var taskStatuses = []string{"pending", "in_progress", "completed", "deleted"}

// exactly decodes a JSON object whose keys are among keys, spelled so
// (statusChange may be absent), each but statusChange present.
func exactly(raw json.RawMessage, keys ...string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	for k := range m {
		if !slices.Contains(keys, k) {
			return nil, false
		}
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok && k != "statusChange" {
			return nil, false
		}
	}
	return m, true
}

func str(raw json.RawMessage, s *string) bool {
	return raw != nil && json.Unmarshal(raw, s) == nil
}
