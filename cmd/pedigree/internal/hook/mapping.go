package hook

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Files in the data directory.
const (
	// MappingFile maps Claude Code's tools to principals.
	MappingFile = pedigree.HookMappingFile
	// KeyDir holds the private keys of the principals the hook signs for.
	KeyDir = "hook-keys"
	// StateDir holds, per session, which call each tool_use_id was.
	StateDir = "hook-state"
)

// Mapping says whom the hook signs for: the user's prompts, the agent's
// calls, and each tool's output. It is written by Init and read at every
// event.
type Mapping struct {
	Version int `json:"version"`
	// User signs the prompts (and the approvals given at Claude Code's
	// permission prompt); Agent signs the calls.
	User  string `json:"user"`
	Agent string `json:"agent"`
	// Principals are every principal the hook signs for, with the tier
	// registered for it and its private key (relative to the data
	// directory).
	Principals map[string]Principal `json:"principals"`
	// Tools maps a Claude Code tool name to its output's principal.
	Tools map[string]ToolOutput `json:"tools"`
	// MCP is for every MCP tool (mcp__SERVER__TOOL) not in Tools.
	MCP ToolOutput `json:"mcp"`
	// Default is for every other tool not in Tools.
	Default ToolOutput `json:"default"`
	// AllowClean answers "allow" when the gate allows, skipping Claude
	// Code's own permission rules. Off by default: a clean context is left
	// to Claude Code.
	AllowClean bool `json:"allow_clean"`
	// Repository maps a tier (user, internal) to the principal that signs
	// the content of the workspaces the operator declared at that tier.
	Repository map[string]string `json:"repository,omitempty"`
	// Gateway is the name of pedigree's MCP gateway among Claude Code's MCP
	// servers: the hook defers to the gateway's record of its tools'
	// results (gateway.go). "" turns that off.
	Gateway string `json:"gateway,omitempty"`
	// Workspaces are the repositories the operator vouches for
	// ('pedigree hook claude trust-workspace'; see workspace.go).
	Workspaces []Workspace `json:"workspaces,omitempty"`
}

// Principal is one principal the hook signs for.
type Principal struct {
	Tier string `json:"tier"`
	Key  string `json:"key"`
}

// ToolOutput says how a tool's output is recorded.
type ToolOutput struct {
	Principal string `json:"principal,omitempty"`
	// Skip: the output only echoes the agent's own arguments back
	// (TodoWrite), so it adds no source to the session and is not
	// recorded. The call itself is still checked.
	Skip bool `json:"skip,omitempty"`
}

// The default principals.
const (
	DefaultUser  = "user:claude"
	DefaultAgent = "agent:claude-code"
	ToolWeb      = "tool:claude-web"
	ToolLocal    = "tool:claude-local"
	ToolMCP      = "tool:claude-mcp"
)

// DefaultMapping is what Init writes, with user as the user's principal.
func DefaultMapping(user string) *Mapping {
	m := &Mapping{
		Version: 1, User: user, Agent: DefaultAgent,
		Principals: map[string]Principal{
			user:         {Tier: registry.User.String()},
			DefaultAgent: {Tier: registry.Internal.String()},
			ToolWeb:      {Tier: registry.External.String()},
			ToolLocal:    {Tier: registry.Unverified.String()},
			ToolMCP:      {Tier: registry.External.String()},
			RepoUser:     {Tier: registry.User.String()},
			RepoInternal: {Tier: registry.Internal.String()},
		},
		Repository: map[string]string{registry.User.String(): RepoUser, registry.Internal.String(): RepoInternal},
		Gateway:    DefaultGateway,
		Tools: map[string]ToolOutput{
			"WebFetch": {Principal: ToolWeb}, "WebSearch": {Principal: ToolWeb},
			"TodoWrite": {Skip: true}, "ExitPlanMode": {Skip: true},
		},
		MCP:     ToolOutput{Principal: ToolMCP},
		Default: ToolOutput{Principal: ToolLocal},
	}
	for _, t := range []string{"Read", "Grep", "Glob", "LS", "Bash", "BashOutput", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead", "Task"} {
		m.Tools[t] = ToolOutput{Principal: ToolLocal}
	}
	for id, p := range m.Principals {
		p.Key = filepath.Join(KeyDir, strings.Replace(id, ":", "-", 1)+".key")
		m.Principals[id] = p
	}
	return m
}

// DefaultCatalog is the catalog entries Init merges into tools.yaml: what
// can act (run a command, write a file, carry data out in a URL) is
// sensitive; what only reads is not. Tools missing from the catalog,
// MCP tools among them, are sensitive and denied on a tainted context (the
// gate's default).
func DefaultCatalog() *gate.Catalog {
	// AskOnUntrusted: on a tainted context these are put to the person at
	// Claude Code's own permission prompt, with the reason; reading a
	// repository's files taints the context, and a deny there would stop
	// every edit and test run after the first Read.
	yes, no := true, false
	act := gate.Tool{Sensitive: &yes, Irreversible: true, AskOnUntrusted: true, Role: trajectory.Other}
	read := gate.Tool{Sensitive: &no, Role: trajectory.Other}
	c := &gate.Catalog{Tools: map[string]gate.Tool{
		// A Bash call's description is the words Claude shows beside the
		// command: it does nothing, so it may come from anywhere.
		"Bash": {Sensitive: &yes, Irreversible: true, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other,
			Args: map[string]gate.ArgRule{"description": {Trusted: false}}},
		"WebFetch": {Sensitive: &yes, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other},
		// Monitor runs a command in the background, as Bash does.
		"Monitor": {Sensitive: &yes, Irreversible: true, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other,
			Args: map[string]gate.ArgRule{"description": {Trusted: false}}},
		// SendMessage reaches a subagent, a teammate, or another Claude
		// session on the machine or in the cloud, which acts on it; an
		// Agent call with isolation "remote" runs its subagent in the
		// cloud, whose calls no hook here sees (the hook checks it as
		// RemoteAgent).
		"SendMessage": {Sensitive: &yes, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other},
		RemoteAgent:   {Sensitive: &yes, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other},
		// A task given an owner is posted to that teammate's mailbox, as
		// SendMessage would (tools.go).
		AssignedTaskCreate: {Sensitive: &yes, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other},
		AssignedTaskUpdate: {Sensitive: &yes, ExternalSink: true, AskOnUntrusted: true, Role: trajectory.Other},
	}}
	// A worktree is made or removed (with its changes), a workflow's
	// script run, a prompt given back to the model later (a wakeup, a
	// scheduled job) or a schedule removed.
	for _, t := range []string{"Write", "Edit", "MultiEdit", "NotebookEdit", "EnterWorktree", "ExitWorktree", "Workflow", "ScheduleWakeup", "CronCreate", "CronDelete"} {
		c.Tools[t] = act
	}
	// Task and Agent (its name since Claude Code 2.1) start a subagent,
	// whose own calls come through these hooks; Skill loads a skill's text
	// (recorded as its writer's, slash.go), ToolSearch a deferred tool's
	// schema; the others keep the task list, ask the person, or list,
	// report or stop Claude Code's own work.
	for _, t := range []string{"Read", "Grep", "Glob", "LS", "NotebookRead", "BashOutput", "WebSearch", "TodoWrite", "ExitPlanMode", "Task",
		"Agent", "Skill", "ToolSearch", "ListAgents", "ReportFindings", "TaskStop", "EnterPlanMode", "AskUserQuestion",
		"TaskCreate", "TaskUpdate", "TaskGet", "TaskList", "CronList"} {
		c.Tools[t] = read
	}
	return c
}

// Output is the principal that signs a tool's output ("" with skip).
func (m *Mapping) Output(tool string) ToolOutput {
	if t, ok := m.Tools[tool]; ok {
		return t
	}
	if strings.HasPrefix(tool, "mcp__") {
		return m.MCP
	}
	return m.Default
}

// LoadMapping reads the data directory's mapping, strictly.
func LoadMapping(dir string) (*Mapping, error) {
	b, err := safefile.ReadFile(dir, MappingFile, pedigree.MaxConfigBytes)
	return mappingFrom(dir, b, err)
}

// loadSealedMapping reads the mapping as the operator sealed it
// (pedigree.ReadSealed): after freeze, which principal signs each tool's
// output, and which tools are skipped, are what was frozen.
func loadSealedMapping(dir string, view *pedigree.RegistryView) (*Mapping, error) {
	b, err := pedigree.ReadSealed(dir, view, MappingFile)
	return mappingFrom(dir, b, err)
}

func mappingFrom(dir string, b []byte, err error) (*Mapping, error) {
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s has no %s: run 'pedigree hook claude init' before 'registry freeze'", dir, MappingFile)
		}
		return nil, err
	}
	var m Mapping
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", MappingFile, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", MappingFile, err)
	}
	return &m, nil
}

// validate checks the mapping's shape, and that no tool's output is signed
// by a principal the mapping registers as user or internal: a tool's output
// is never the user's words nor the agent's own.
func (m *Mapping) validate() error {
	if m.Version != 1 {
		return fmt.Errorf("version %d, want 1", m.Version)
	}
	tier := func(id string) (registry.Tier, error) {
		p, ok := m.Principals[id]
		if !ok {
			return 0, fmt.Errorf("%q is not among its principals", id)
		}
		return registry.ParseTier(p.Tier)
	}
	if t, err := tier(m.User); err != nil || t != registry.User {
		return fmt.Errorf("the user %q must be a principal of tier user (%v)", m.User, err)
	}
	if t, err := tier(m.Agent); err != nil || t != registry.Internal {
		return fmt.Errorf("the agent %q must be a principal of tier internal (%v)", m.Agent, err)
	}
	outs := []ToolOutput{m.MCP, m.Default}
	for _, o := range m.Tools {
		outs = append(outs, o)
	}
	for _, o := range outs {
		if o.Skip {
			continue
		}
		t, err := tier(o.Principal)
		if err != nil {
			return fmt.Errorf("a tool's output principal %v", err)
		}
		if t != registry.Unverified && t != registry.External {
			return fmt.Errorf("tool output signed by %s, a principal of tier %s: a tool's output must be unverified or external", o.Principal, t)
		}
	}
	if m.Gateway != "" && (strings.Contains(m.Gateway, "__") || !toolPat.MatchString(m.Gateway)) {
		return fmt.Errorf("gateway %q: an MCP server name of [A-Za-z0-9._:-], without \"__\"", m.Gateway)
	}
	if err := m.validateWorkspaces(); err != nil {
		return err
	}
	for id, p := range m.Principals {
		if err := registry.ValidateID(id); err != nil {
			return err
		}
		if p.Key == "" || filepath.IsAbs(p.Key) || !filepath.IsLocal(p.Key) {
			return fmt.Errorf("principal %s: key %q must be a path inside the data directory", id, p.Key)
		}
	}
	return nil
}

// ids lists the mapping's principals in order.
func (m *Mapping) ids() []string {
	out := make([]string, 0, len(m.Principals))
	for id := range m.Principals {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
