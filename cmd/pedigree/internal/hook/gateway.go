package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/lineage"
)

// One session, one record. When Claude Code reaches pedigree's MCP gateway
// (its MCP server named Mapping.Gateway, tools mcp__pedigree__TOOL)
// the hook checks each call in the Claude Code session as for any tool, and
// binds it for the gateway: a file under hook-state/gateway names the
// session for that call (the tool's exposed name and canonical arguments). The
// gateway (pedigree mcp run) consumes the binding, decides in that session
// and records the call and its result there, with its own precise
// provenance (a memory read derives from the memory it returns). The hook
// then defers to that record instead of signing the result again as an
// MCP server's output: it looks in its own session's context for the
// output of the gateway's call of the same tool and arguments, made after
// the hook's latest logged check of that call. A binding is only a hint: when the hook finds no such record
// (no gateway, a binding lost or redirected) it records the result as the
// mapping says, so nothing the model sees is left out of the context.

// DefaultGateway is the name 'pedigree claude install' gives the gateway's
// MCP server in Claude Code.
const DefaultGateway = "pedigree"

// bindTTL bounds how long a binding waits for its call.
const bindTTL = 10 * time.Minute

// gatewayTool is the name the gateway exposes a tool under (TOOL, or
// UPSTREAM__TOOL when two upstreams have one of that name), for a Claude
// Code tool name, when the tool is the gateway's.
func (m *Mapping) gatewayTool(tool string) (string, bool) {
	if m.Gateway == "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(tool, "mcp__"+m.Gateway+"__")
	return rest, ok && rest != ""
}

// exposes says whether the gateway's catalog key UPSTREAM.TOOL is exposed
// under name.
func exposes(key, name string) bool {
	up, tool, ok := strings.Cut(key, ".")
	return ok && (name == tool || name == up+"__"+tool)
}

type binding struct {
	Session string `json:"session"`
	Time    int64  `json:"time"`
}

func bindPath(dir, name string, canon []byte) string {
	return filepath.Join(dir, StateDir, "gateway", digest(lineage.ActionDigest(name, canon)))
}

// bind records that the call the hook checked for ev goes to the gateway
// in ev's session.
func (h *Handler) bind(ev *Event, name string) error {
	canon, err := lineage.CanonicalArgs(ev.ToolInput)
	if err != nil {
		return nil // the gateway refuses it too
	}
	d := bindPath(h.dir, name, canon)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(binding{Session: ev.SessionID, Time: time.Now().UnixNano()})
	p := filepath.Join(d, fmt.Sprintf("%019d-%s", time.Now().UnixNano(), digest(ev.SessionID+"\x00"+ev.ToolUseID)))
	return writeFile(p, b, 0o600)
}

// GatewaySession is the Claude Code session the hook bound a gateway call
// to (the tool's exposed name and its canonical arguments), or "": the oldest binding
// of that action not older than bindTTL, consumed. It is the gateway's
// Options.Bind for a data directory the hook serves.
func GatewaySession(dir, name string, canon []byte) string {
	d := bindPath(dir, name, canon)
	names, err := os.ReadDir(d)
	if err != nil {
		return ""
	}
	var files []string
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".tmp") {
			files = append(files, n.Name())
		}
	}
	sort.Strings(files)
	now := time.Now()
	for _, name := range files {
		p := filepath.Join(d, name)
		b, err := os.ReadFile(p)
		if os.Remove(p) != nil || err != nil {
			continue // another call took it
		}
		var x binding
		if json.Unmarshal(b, &x) != nil || now.Sub(time.Unix(0, x.Time)) > bindTTL || !sessionPat.MatchString(x.Session) || len(x.Session) > lineage.MaxSessionLen {
			continue
		}
		return x.Session
	}
	return ""
}

// gatewayOutput is the gateway's output entry for the tool use ev in ev's
// session: among the latest entries of the session's context, an output
// deriving from the gateway agent's call of the same tool with the same
// arguments, made no earlier than the hook's latest logged check of this
// call in the session (from the decision log, not from the state file a
// writer of the directory could point at an older check). The gateway may
// still be committing it: it is waited for, briefly. "" when there is none.
func (h *Handler) gatewayOutput(ctx context.Context, ev *Event, name string) string {
	canon, err := lineage.CanonicalArgs(ev.ToolInput)
	if err != nil {
		return ""
	}
	args, err := boundArgs(ev.ToolInput)
	if err != nil {
		return ""
	}
	checkedArgs, err := lineage.CanonicalArgs(args)
	if err != nil {
		return ""
	}
	ds, err := h.b.Decisions(ctx, pedigree.DecisionQuery{Session: ev.SessionID, Limit: maxGatewayScan})
	if err != nil {
		return ""
	}
	var since time.Time
	action := lineage.ActionDigest(ev.ToolName, checkedArgs)
	for i := len(ds) - 1; i >= 0; i-- {
		if d := ds[i]; d.Principal == h.m.Agent && d.Tool == ev.ToolName && d.ArgsDigest == action && d.Session == ev.SessionID {
			if since, err = time.Parse(time.RFC3339Nano, d.Time); err != nil {
				return ""
			}
			break
		}
	}
	if since.IsZero() {
		return ""
	}
	open := func(id string) *lineage.Statement {
		v, err := h.b.Show(ctx, id)
		if err != nil || v.SignatureError != "" {
			return nil
		}
		st, _, _, err := lineage.Open(v.Envelope)
		if err != nil {
			return nil
		}
		return st
	}
	seen := map[string]bool{}
	for try := 0; try < 40; try++ {
		ids, err := h.b.Context(ctx, ev.SessionID)
		if err != nil {
			return ""
		}
		for i := len(ids) - 1; i >= 0 && i >= len(ids)-maxGatewayScan; i-- {
			id := ids[i]
			if seen[id] {
				continue
			}
			seen[id] = true
			st := open(id)
			if st == nil || st.Kind != lineage.KindToolOutput || st.Session != ev.SessionID || len(st.Parents) == 0 {
				continue
			}
			c := open(st.Parents[0].ID)
			if c == nil || c.Kind != lineage.KindCall || c.Principal != gateway.AgentPrincipal || c.Session != ev.SessionID ||
				!exposes(c.Tool, name) || !bytes.Equal(c.Args, canon) {
				continue
			}
			if at, err := time.Parse(time.RFC3339Nano, c.Time); err == nil && !at.Before(since) {
				return id
			}
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(50 * time.Millisecond):
		}
	}
	return ""
}

// maxGatewayScan is how far back in the context the gateway's output is
// looked for.
const maxGatewayScan = 64
