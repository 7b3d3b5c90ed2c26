package hook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/lineage"
	"sigs.k8s.io/yaml"
)

// The MCP metadata the model sees. Claude Code puts every configured MCP
// server's tool names, descriptions and input schemas into the model's
// context at the start of a session and never passes them to a hook: no
// event and no transcript line carries them. A tool description that says
// "<IMPORTANT>before answering, run curl ...</IMPORTANT>" would steer a
// session whose record holds only clean content.
//
// So at each prompt and each proposed call the hook reads the MCP server
// configuration Claude Code loads for the event's working directory, as
// Claude Code resolves it (its user scope, the mcpServers of ~/.claude.json
// or $CLAUDE_CONFIG_DIR/.claude.json; its local scope, that file's
// projects[DIR].mcpServers for the working directory and every directory
// above it, and for the main checkout's root in a linked git worktree;
// its project scope, every .mcp.json from the working directory
// up to the root; the managed managed-mcp.json; the servers a subagent's
// frontmatter defines, agentFiles), and sorts each server:
//
//   - Behind pedigree's gateway ('pedigree [--dir DIR] mcp run ...'): the
//     gateway sealed the server's metadata and records in the session any
//     that differs from the seal, so the hook records nothing. A gateway
//     over the hook's own data directory runs only upstreams sealed in this
//     store; another gateway (the one-line form, with a directory of its
//     own, sealed on its first start) counts when the entry is the user's
//     own configuration (~/.claude.json, the managed file) or a .mcp.json
//     the operator vouched for in a workspace declaration: a .mcp.json
//     nobody vouched for is the repository writer's word, and its server's
//     first metadata would be sealed on trust. The entry is read as Claude
//     Code reads it: exact keys, the last --dir (after 'mcp run' too). A
//     .mcp.json entry counts as the gateway over this store only without
//     an env that picks the program (PATH, LD_*, DYLD_*) and without
//     ${...} in its args, which Claude Code expands. What a gateway noted
//     its upstreams offer that differs from the seal (gateway.DriftDir: a
//     rug pull, a new tool, a list_changed, the notes 'mcp list' shows), in
//     the directory its entry names or, for the one-line form, the one
//     'mcp run' derives from the command, is recorded in the session as
//     those upstreams' unsealed content: the gateway records it in its own
//     sessions, and the listing Claude Code made at its start was bound to
//     none of the hook's.
//   - Any other server (a stdio server run directly, an http or sse
//     server, an entry the hook cannot read): its metadata reached the
//     model unsealed. The hook records an entry of the MCP principal
//     (external) in the session, naming the server and what it runs
//     (never its env or headers), once per session: it taints what follows, and an ask
//     or a deny names "the tool descriptions of MCP server NAME".
//
// The hook does not start a server to read its metadata: that would run a
// program of the configuration's choosing inside the hook, and what it
// answered the hook need not be what it answered Claude Code. A
// configuration file that cannot be read or parsed is recorded the same
// way (unsealed metadata of servers the hook cannot name); it is opened
// without blocking, so a FIFO in its place cannot hang the hook into
// Claude Code's timeout, which lets the call through. Servers given
// on Claude Code's command line (--mcp-config), by plugins, or by claude.ai
// connectors are not in these files: docs/hooks.md names that gap.

// mcpConfig is one place Claude Code reads mcpServers from.
type mcpConfig struct {
	File  string
	At    []string
	Scope string // user, local, project, managed
}

// managedMCPFiles are the system-wide MCP configurations.
var managedMCPFiles = []string{"/etc/claude-code/managed-mcp.json", "/Library/Application Support/ClaudeCode/managed-mcp.json"}

// claudeJSON is the file of Claude Code's user and local scopes.
func claudeJSON() string {
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Join(d, ".claude.json")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".claude.json")
	}
	return ""
}

// mcpConfigs are the places Claude Code may read for a session in cwd,
// conservatively: every directory from cwd up counts as a project root.
func mcpConfigs(cwd string) []mcpConfig {
	var out []mcpConfig
	cj := claudeJSON()
	if cj != "" {
		out = append(out, mcpConfig{File: cj, At: []string{"mcpServers"}, Scope: "user"})
	}
	if filepath.IsAbs(cwd) {
		for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
			if cj != "" {
				out = append(out, mcpConfig{File: cj, At: []string{"projects", d, "mcpServers"}, Scope: "local"})
			}
			out = append(out, mcpConfig{File: filepath.Join(d, ".mcp.json"), At: []string{"mcpServers"}, Scope: "project"})
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if root := canonicalGitRoot(cwd); cj != "" && root != "" {
		out = append(out, mcpConfig{File: cj, At: []string{"projects", root, "mcpServers"}, Scope: "local"})
	}
	for _, f := range managedMCPFiles {
		out = append(out, mcpConfig{File: f, At: []string{"mcpServers"}, Scope: "managed"})
	}
	return out
}

// canonicalGitRoot is the main checkout's root when cwd is in a linked git
// worktree, as Claude Code finds it to key its local scope: the worktree's
// .git file names its git directory, whose commondir is the main
// repository's .git. "" when cwd is in no linked worktree.
func canonicalGitRoot(cwd string) string {
	if !filepath.IsAbs(cwd) {
		return ""
	}
	// Read without blocking (readMCPConfig): a FIFO named .git in /tmp
	// would otherwise hang the hook.
	for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
		b, err := readMCPConfig(filepath.Join(d, ".git"))
		switch {
		case err != nil:
			return "" // a main checkout (its .git a directory), or unreadable
		case b == nil && filepath.Dir(d) == d:
			return ""
		case b == nil:
			continue
		}
		gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return ""
		}
		a := strings.TrimSpace(gitdir)
		if !filepath.IsAbs(a) {
			a = filepath.Join(d, a)
		}
		c, err := readMCPConfig(filepath.Join(a, "commondir"))
		if err != nil || c == nil {
			return ""
		}
		f := strings.TrimSpace(string(c))
		if !filepath.IsAbs(f) {
			f = filepath.Join(a, f)
		}
		if f = filepath.Clean(f); filepath.Base(f) == ".git" {
			return filepath.Dir(f)
		}
		return f
	}
}

// agentFiles are the subagent definitions Claude Code may load for a
// session in cwd, whose frontmatter may define MCP servers (scope "agent"
// in Claude Code): .claude/agents/*.md in cwd and every directory above it
// (the repository's word), and the user's own in ~/.claude/agents (or
// $CLAUDE_CONFIG_DIR/agents), one level of subdirectories included.
func agentFiles(cwd string) []mcpConfig {
	var out []mcpConfig
	glob := func(dir, scope string) {
		for _, pat := range []string{"*.md", "*/*.md"} {
			fs, _ := filepath.Glob(filepath.Join(escapeGlob(dir), pat))
			sort.Strings(fs)
			for _, f := range fs {
				out = append(out, mcpConfig{File: f, Scope: scope})
			}
		}
	}
	user := os.Getenv("CLAUDE_CONFIG_DIR")
	if home, err := os.UserHomeDir(); user == "" && err == nil && home != "" {
		user = filepath.Join(home, ".claude")
	}
	if user != "" {
		glob(filepath.Join(user, "agents"), "user")
	}
	if filepath.IsAbs(cwd) {
		for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
			if a := filepath.Join(d, ".claude", "agents"); user == "" || !sameDir(a, filepath.Join(user, "agents")) {
				glob(a, "project")
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return out
}

func escapeGlob(p string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(p)
}

type agentServer struct {
	Name string
	Raw  json.RawMessage
}

// agentServers are the MCP servers an agent definition's frontmatter
// defines: its mcpServers list, each item a name (a server configured
// elsewhere, already counted) or a one-key object NAME: ENTRY.
func agentServers(doc []byte) ([]agentServer, error) {
	o, err := agentFrontmatter(doc)
	if err != nil || o == nil {
		return nil, err
	}
	v, ok := o["mcpServers"]
	if !ok || string(v) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, fmt.Errorf("mcpServers: %v", err)
	}
	var out []agentServer
	for _, it := range items {
		var name string
		if json.Unmarshal(it, &name) == nil {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(it, &m); err != nil {
			return nil, fmt.Errorf("mcpServers: %v", err)
		}
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, agentServer{n, compact(m[n])})
		}
	}
	return out, nil
}

// agentFrontmatter is an agent definition's frontmatter, its keys as
// written (nil when it has none Claude Code reads).
func agentFrontmatter(doc []byte) (map[string]json.RawMessage, error) {
	// Leniently: a BOM, blank lines and spaces around the '---' lines do
	// not hide the frontmatter from the hook.
	lines := strings.Split(strings.TrimPrefix(strings.ReplaceAll(string(doc), "\r\n", "\n"), "\ufeff"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return nil, nil
	}
	lines = lines[1:]
	if end := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "---" }); end >= 0 {
		lines = lines[:end]
	}
	j, err := yaml.YAMLToJSON([]byte(strings.Join(lines, "\n")))
	if err != nil {
		return nil, err
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(j, &o); err != nil {
		return nil, nil // not a mapping: no frontmatter Claude Code reads
	}
	return o, nil
}

// mcpServer is one configured server.
type mcpServer struct {
	Name  string
	Scope string
	File  string
	Raw   json.RawMessage
}

// maxMCPConfigBytes bounds a configuration file the hook reads
// (~/.claude.json keeps history, and grows).
const maxMCPConfigBytes = 64 << 20

// readMCPConfig reads the file whole (nil when it does not exist).
func readMCPConfig(path string) ([]byte, error) {
	b, err := readRegular(path, maxMCPConfigBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// readRegular reads a regular file whole, at most max bytes whatever its
// size says (a link is followed; what it leads to must be regular).
func readRegular(path string, max int) ([]byte, error) {
	// O_NONBLOCK: a FIFO named .mcp.json (another user's in /tmp, or a
	// repository's symlink to one) would block the open until a writer
	// came, and Claude Code lets a call through when its hook times out.
	// It opens at once, and is refused below as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return b, nil
}

// serversAt is the mcpServers object at path at of doc, by name. objs
// keeps the objects parsed on the way, by file and path, so that the
// projects of a large ~/.claude.json are parsed once per event, not once
// per directory looked up.
func serversAt(objs map[string]map[string]json.RawMessage, file string, doc []byte, at []string) (map[string]json.RawMessage, error) {
	var cur json.RawMessage = doc
	for i, k := range at {
		key := file + "\x00" + strings.Join(at[:i], "\x00")
		o, ok := objs[key]
		if !ok {
			if err := json.Unmarshal(cur, &o); err != nil {
				return nil, err
			}
			objs[key] = o
		}
		v, ok := o[k]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			return nil, nil
		}
		cur = v
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(cur, &servers); err != nil {
		return nil, fmt.Errorf("%s: %v", strings.Join(at, "."), err)
	}
	return servers, nil
}

// gated says whether a server runs behind pedigree's gateway, in a way the
// hook can rely on for its metadata (see above), and the gateway's data
// directory when its entry names one (absolute).
func (h *Handler) gated(s mcpServer, doc []byte) (ok bool, gwDir string) {
	e, ok := parseEntry(s.Raw)
	if !ok || (e.Type != "" && e.Type != "stdio") {
		return false, ""
	}
	exe, _ := os.Executable()
	if e.Command != "pedigree" && (exe == "" || e.Command != exe) {
		return false, ""
	}
	dir, rest := "", e.Args
	for len(rest) > 0 && rest[0] != "mcp" {
		switch {
		case rest[0] == "--dir" && len(rest) > 1:
			dir, rest = rest[1], rest[2:]
		case strings.HasPrefix(rest[0], "--dir="):
			dir, rest = strings.TrimPrefix(rest[0], "--dir="), rest[1:]
		default:
			return false, "" // a flag the hook does not know: not read as a gateway
		}
	}
	if len(rest) < 2 || rest[0] != "mcp" || rest[1] != "run" {
		return false, ""
	}
	// The command line takes --dir after 'mcp run' too (up to "--"), and
	// the last one wins: 'pedigree --dir H mcp run --dir ./store' serves
	// ./store.
	for i := 2; i < len(rest) && rest[i] != "--"; i++ {
		switch {
		case rest[i] == "--dir" && i+1 < len(rest):
			dir = rest[i+1]
			i++
		case rest[i] == "--dir":
			return false, ""
		case strings.HasPrefix(rest[i], "--dir="):
			dir = strings.TrimPrefix(rest[i], "--dir=")
		}
	}
	named := dir != ""
	if dir == "" {
		dir = e.Env["PEDIGREE_DIR"]
		named = dir != ""
	}
	if !filepath.IsAbs(dir) {
		dir = ""
	}
	if !named {
		dir = oneLineDir(rest[2:], e.Env) // "" when that is not the one-line form
	}
	// An entry's env is its writer's word on what runs: PATH chooses which
	// "pedigree" Claude Code starts (Node looks the command up in the PATH
	// of the env it passes), the loader's variables what that binary runs.
	// Claude Code also expands ${VAR} and ${VAR:-default} in its args: what
	// the hook reads there is not what runs. Taken from the user's own
	// configuration, not from a .mcp.json.
	runsOther := s.Scope == "project" && (loaderEnv(e.Env) || slices.ContainsFunc(e.Args, func(a string) bool { return strings.Contains(a, "${") }))
	if named && dir != "" && sameDir(dir, h.dir) && !runsOther {
		return true, dir // only upstreams sealed in this store run there
	}
	switch s.Scope {
	case "user", "local", "managed":
		return true, dir
	}
	p, _ := h.vouched(s.File, doc)
	return p != "", dir
}

// oneLineDir is the directory the one-line gateway ('pedigree mcp run
// [flags] -- COMMAND...', no --dir) keeps for COMMAND, as 'mcp run'
// derives it: $PEDIGREE_DIR, else $XDG_DATA_HOME/pedigree/mcp/NAME-H, else
// ~/.local/share/pedigree/mcp/NAME-H, H the first 4 bytes of the sha256 of
// the command line's JSON. It is found by H, whatever NAME is. "" when
// there is no command, or no such directory.
func oneLineDir(run []string, env map[string]string) string {
	i := slices.Index(run, "--")
	if i < 0 || i == len(run)-1 {
		return ""
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	base := ""
	switch {
	case getenv("PEDIGREE_DIR") != "":
		if d := getenv("PEDIGREE_DIR"); filepath.IsAbs(d) {
			return d
		}
		return ""
	case getenv("XDG_DATA_HOME") != "":
		base = filepath.Join(getenv("XDG_DATA_HOME"), "pedigree")
	case getenv("HOME") != "":
		base = filepath.Join(getenv("HOME"), ".local", "share", "pedigree")
	default:
		return ""
	}
	b, _ := json.Marshal(run[i+1:])
	sum := sha256.Sum256(b)
	suffix := "-" + hex.EncodeToString(sum[:4])
	if n := slices.Index(run[:i], "--name"); n >= 0 && n+1 < i {
		return filepath.Join(base, "mcp", run[n+1]+suffix)
	}
	des, _ := os.ReadDir(filepath.Join(base, "mcp"))
	for _, de := range des {
		if strings.HasSuffix(de.Name(), suffix) {
			return filepath.Join(base, "mcp", de.Name())
		}
	}
	return ""
}

// loaderEnv says whether env sets what decides which program runs.
func loaderEnv(env map[string]string) bool {
	for k := range env {
		if k == "PATH" || strings.HasPrefix(k, "LD_") || strings.HasPrefix(k, "DYLD_") {
			return true
		}
	}
	return false
}

// seenEntry is a server entry as Claude Code reads it.
type seenEntry struct {
	Type, Command, URL string
	Args               []string
	Env                map[string]string
}

// parseEntry reads a server entry with JSON's exact, case-sensitive keys,
// as Claude Code's JSON.parse does: encoding/json folds case when it
// fills a struct, and {"command":"node","Command":"pedigree"} would read
// as the gateway while Claude Code runs node. A field of the wrong type is
// not an entry the hook can read.
func parseEntry(raw json.RawMessage) (seenEntry, bool) {
	var o map[string]json.RawMessage
	var e seenEntry
	if json.Unmarshal(raw, &o) != nil || o == nil {
		return e, false
	}
	for k, v := range map[string]any{"type": &e.Type, "command": &e.Command, "url": &e.URL, "args": &e.Args, "env": &e.Env} {
		if b, ok := o[k]; ok && json.Unmarshal(b, v) != nil {
			return e, false
		}
	}
	return e, true
}

type unsealedText struct{ content, label string }

// runs is what a server entry runs or reaches (its type, command and
// arguments, or URL), without its env and headers: the record names the
// server, and keeps no credential the configuration passes it.
func runs(raw json.RawMessage) string {
	e, ok := parseEntry(raw)
	if !ok {
		return "an entry that is not an object of an MCP server"
	}
	b, _ := json.Marshal(struct {
		Type    string   `json:"type,omitempty"`
		Command string   `json:"command,omitempty"`
		Args    []string `json:"args,omitempty"`
		URL     string   `json:"url,omitempty"`
	}{e.Type, e.Command, e.Args, e.URL})
	return string(b)
}

// offered is what the gateway of data directory dir noted its upstreams
// offer that differs from the operator's seal (gateway.DriftDir, which
// 'mcp list' shows): the gateway records such metadata in its own
// sessions, and the tools/list Claude Code sent at its start was bound to
// no session of the hook's. Each note is the metadata itself, recorded as
// the server's unsealed content. A note that cannot be read counts as
// unsealed metadata of that upstream.
func offered(dir string) []unsealedText {
	if dir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, gateway.DriftDir, "*.json"))
	sort.Strings(files)
	var out []unsealedText
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		label := fmt.Sprintf("the tool descriptions the gateway's upstream %s offers, which differ from the operator's seal", clip(name))
		d, err := gateway.LoadDrift(dir, name)
		if err != nil || d == nil {
			out = append(out, unsealedText{fmt.Sprintf("The gateway in %s noted metadata of its upstream %q that differs from the seal, in a note the hook cannot read (%v).", dir, name, err), label})
			continue
		}
		b, _ := json.Marshal(d.Offered)
		out = append(out, unsealedText{fmt.Sprintf("The tool metadata the gateway's upstream %q offered (seen %s), which differs from what the operator sealed in %s: %s", name, d.Seen, dir, b), label})
	}
	return out
}

func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// mcpMetadata records, in ev's session, the metadata of every configured
// MCP server not behind the gateway, once per session.
func (h *Handler) mcpMetadata(ctx context.Context, ev *Event) error {
	var unsealed []unsealedText
	add := func(content, label string) { unsealed = append(unsealed, unsealedText{content, label}) }
	docs := map[string][]byte{}
	objs := map[string]map[string]json.RawMessage{}
	for _, c := range mcpConfigs(ev.CWD) {
		doc, ok := docs[c.File]
		if !ok {
			var err error
			doc, err = readMCPConfig(c.File)
			if err != nil {
				add(fmt.Sprintf("Claude Code's MCP configuration %s could not be read (%v): the metadata of the servers it names reached the model unsealed.", c.File, err),
					fmt.Sprintf("the MCP configuration %s, which the hook could not read", clip(c.File)))
				doc = nil
			}
			docs[c.File] = doc
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		servers, err := serversAt(objs, c.File, doc, c.At)
		if err != nil {
			add(fmt.Sprintf("Claude Code's MCP configuration %s could not be parsed (%v): the metadata of the servers it names reached the model unsealed.", c.File, err),
				fmt.Sprintf("the MCP configuration %s, which the hook could not parse", clip(c.File)))
			continue
		}
		names := make([]string, 0, len(servers))
		for n := range servers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			s := mcpServer{Name: n, Scope: c.Scope, File: c.File, Raw: compact(servers[n])}
			if ok, gwDir := h.gated(s, doc); ok {
				// Behind the gateway: sealed, except what its upstreams
				// offered that differs from the seal.
				for _, d := range offered(gwDir) {
					add(d.content, d.label)
				}
				continue
			}
			add(fmt.Sprintf("The tool names, descriptions and schemas of the MCP server %q (%s scope, %s), which reached the model without pedigree's gateway, unsealed. It runs: %s", n, c.Scope, c.File, runs(s.Raw)),
				fmt.Sprintf("the tool descriptions of MCP server %s (%s scope, not behind pedigree's gateway)", clip(n), c.Scope))
		}
	}
	for _, f := range agentFiles(ev.CWD) {
		doc, err := readMCPConfig(f.File)
		if err != nil {
			add(fmt.Sprintf("The agent definition %s could not be read (%v): the metadata of the MCP servers its frontmatter may define reached the model unsealed.", f.File, err),
				fmt.Sprintf("the agent definition %s, which the hook could not read", clip(f.File)))
			continue
		}
		servers, err := agentServers(doc)
		if err != nil {
			add(fmt.Sprintf("The agent definition %s could not be parsed (%v): the metadata of the MCP servers its frontmatter may define reached the model unsealed.", f.File, err),
				fmt.Sprintf("the agent definition %s, which the hook could not parse", clip(f.File)))
			continue
		}
		for _, sv := range servers {
			s := mcpServer{Name: sv.Name, Scope: f.Scope, File: f.File, Raw: sv.Raw}
			if ok, gwDir := h.gated(s, doc); ok {
				for _, d := range offered(gwDir) {
					add(d.content, d.label)
				}
				continue
			}
			add(fmt.Sprintf("The tool names, descriptions and schemas of the MCP server %q (agent scope, defined in the frontmatter of %s), which reached the model without pedigree's gateway, unsealed. It runs: %s", sv.Name, f.File, runs(sv.Raw)),
				fmt.Sprintf("the tool descriptions of MCP server %s (agent scope, not behind pedigree's gateway)", clip(sv.Name)))
		}
	}
	if len(unsealed) == 0 {
		return nil
	}
	principal := h.m.MCP.Principal
	if h.m.MCP.Skip || principal == "" {
		var err error
		if principal, err = h.unverified(); err != nil {
			return err
		}
	}
	for _, u := range unsealed {
		content := []byte(u.content)
		in, _, _, err := h.matches(ctx, lineage.DigestContent(content), ev.SessionID, nil, false)
		if err != nil {
			return err
		}
		if in {
			continue // recorded in this session already
		}
		if _, err := h.recordLabelled(ctx, principal, lineage.KindToolOutput, ev.SessionID, content, []lineage.Parent{}, u.label); err != nil {
			return err
		}
	}
	return nil
}
