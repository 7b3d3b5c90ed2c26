package hook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Command output by what the command read. A Bash command's output is as
// trusted as what it read: a local command that reads only a trusted
// workspace (git status, go test, ls, grep on its files) gives output
// signed by the workspace's repository principal; a command that reaches
// the network or another machine (curl, wget, git pull, package installs,
// ssh) gives output signed as web content (external). Everything else keeps
// the mapping's principal (unverified): an unknown command, a subshell, a
// variable, a redirection from a file, a glob, a path outside the
// workspace or ignored by it. And the workspace must hold nothing the
// declaration does not vouch for at the time the output is recorded: every
// file git reports as changed or untracked, and every file a commit since
// the declared one changed, holds the declared content or what the agent
// wrote itself (matched by digest); otherwise even `git status` keeps the
// mapping's principal.

// localCommands are the commands whose output is made of what they read
// from the working directory, with the subcommands allowed ("" for any).
var localCommands = map[string][]string{
	"git":    {"status", "diff", "log", "show", "branch", "rev-parse", "ls-files", "blame", "add", "commit", "grep"},
	"go":     {"test", "build", "vet", "list", "fmt"},
	"gofmt":  nil,
	"ls":     nil,
	"pwd":    nil,
	"wc":     nil,
	"cat":    nil,
	"head":   nil,
	"tail":   nil,
	"grep":   nil,
	"rg":     nil,
	"echo":   nil,
	"true":   nil,
	"cd":     nil,
	"sort":   nil,
	"uniq":   nil,
	"diff":   nil,
	"printf": nil,
}

// networkCommands reach another machine; with subcommands, only those do.
var networkCommands = map[string][]string{
	"curl": nil, "wget": nil, "ssh": nil, "scp": nil, "sftp": nil, "rsync": nil, "nc": nil, "ncat": nil, "telnet": nil, "ftp": nil,
	"http": nil, "gh": nil, "npx": nil, "apt": nil, "apt-get": nil, "brew": nil,
	"git":    {"pull", "fetch", "clone", "push", "ls-remote", "submodule", "remote"},
	"npm":    {"install", "i", "ci", "add", "update", "exec", "view", "publish"},
	"yarn":   {"install", "add", "dlx", "upgrade"},
	"pnpm":   {"install", "i", "add", "dlx", "update"},
	"pip":    {"install", "download"},
	"pip3":   {"install", "download"},
	"go":     {"get", "install", "mod"},
	"cargo":  {"install", "fetch", "add", "update"},
	"docker": {"pull", "run", "build", "push"},
}

// commandOrigin is who signs a Bash command's output, and why; "" keeps
// the mapping's principal.
func (h *Handler) commandOrigin(ctx context.Context, ev *Event) (principal, rule string) {
	var in struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil || in.Command == "" {
		return "", ""
	}
	cmds, ok := splitCommand(in.Command)
	if net := networkCommand(in.Command, cmds); net != "" {
		return h.m.Output("WebFetch").Principal, "the command reaches the network (" + net + ")"
	}
	if !ok || ev.CWD == "" {
		return "", ""
	}
	ws, _ := h.workspaceOf(ev.CWD)
	if ws == nil {
		return "", ""
	}
	cwd := filepath.Clean(ev.CWD)
	for _, words := range cmds {
		next, ok := h.localCommand(ctx, ws, cwd, words)
		if !ok {
			return "", ""
		}
		cwd = next
	}
	if why := h.workspaceDrift(ctx, ws); why != "" {
		h.log.Info("pedigree hook: a local command's output stays unverified", "workspace", ws.Root, "why", why)
		return "", ""
	}
	return h.m.Repository[ws.Tier], fmt.Sprintf("a local command reading workspace %s (commit %s, trusted at tier %s), which holds only declared files and the agent's own", ws.Root, short(ws.Commit), ws.Tier)
}

// searchOrigin is who signs the output of Claude Code's own search tools
// (Grep, Glob, LS), as for the commands: a search of a declared workspace
// (not of an ignored path in it) that holds only declared content and the
// agent's own is the workspace's.
func (h *Handler) searchOrigin(ctx context.Context, ev *Event) (principal, rule string) {
	var in struct {
		Path string `json:"path"`
	}
	json.Unmarshal(ev.ToolInput, &in)
	path := in.Path
	if path == "" {
		path = ev.CWD
	}
	if path == "" || !filepath.IsAbs(path) {
		return "", ""
	}
	ws, rel := h.workspaceOf(path)
	if ws == nil {
		return "", ""
	}
	if rel != "." {
		if _, err := git(ctx, ws.Root, "check-ignore", "-q", "--", rel); err == nil {
			return "", ""
		}
	}
	if why := h.workspaceDrift(ctx, ws); why != "" {
		return "", ""
	}
	return h.m.Repository[ws.Tier], fmt.Sprintf("a search of workspace %s (commit %s, trusted at tier %s), which holds only declared files and the agent's own", ws.Root, short(ws.Commit), ws.Tier)
}

// networkCommand names the first command of a command line that reaches
// the network. A line it cannot split is searched word by word.
func networkCommand(line string, cmds [][]string) string {
	if cmds == nil {
		cmds = [][]string{strings.Fields(line)}
	}
	for _, words := range cmds {
		for i, w := range words {
			subs, ok := networkCommands[filepath.Base(w)]
			if !ok {
				continue
			}
			if subs == nil {
				return filepath.Base(w)
			}
			for _, a := range words[i+1:] {
				if !strings.HasPrefix(a, "-") {
					if slices.Contains(subs, a) {
						return filepath.Base(w) + " " + a
					}
					break
				}
			}
		}
	}
	return ""
}

// localCommand says whether one simple command reads only the workspace
// from cwd, and the working directory after it (cd).
func (h *Handler) localCommand(ctx context.Context, ws *Workspace, cwd string, words []string) (string, bool) {
	if len(words) == 0 {
		return cwd, false
	}
	name, args := words[0], words[1:]
	subs, ok := localCommands[name]
	if !ok {
		return cwd, false
	}
	sub := ""
	if subs != nil {
		if len(args) == 0 || !slices.Contains(subs, args[0]) {
			return cwd, false // git -c ..., go run, a bare go: not known to read only the workspace
		}
		sub, args = args[0], args[1:]
	}
	searches := name == "grep" || name == "rg" || sub == "grep"
	var paths []string
	for i, a := range args {
		switch {
		case a == "--":
		case strings.HasPrefix(a, "-"):
			short := !strings.HasPrefix(a, "--")
			if name == "grep" && (short && strings.ContainsAny(a, "rR") || a == "--recursive" || a == "--dereference-recursive") {
				return cwd, false // grep -r reads ignored directories too
			}
			if name == "ls" && short && strings.Contains(a, "R") {
				return cwd, false
			}
		case name == "go" || name == "echo" || name == "printf" || sub == "commit":
			// packages (go.sum pins what they import), the agent's own words
		case name == "git" && headish(a):
		case searches && i == firstOperand(args):
			// the pattern
		default:
			if name == "git" {
				p := a
				if !filepath.IsAbs(p) {
					p = filepath.Join(cwd, p)
				}
				if _, err := os.Lstat(p); err != nil {
					return cwd, false // a revision: another ref's commits were not declared
				}
			}
			paths = append(paths, a)
		}
	}
	if name == "cd" {
		if len(paths) != 1 {
			return cwd, false
		}
		next := paths[0]
		if !filepath.IsAbs(next) {
			next = filepath.Join(cwd, next)
		}
		if w, _ := h.workspaceOf(next); w != ws {
			return cwd, false
		}
		return filepath.Clean(next), true
	}
	for _, p := range paths {
		if strings.ContainsAny(p, "*?[{~") {
			return cwd, false
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		w, rel := h.workspaceOf(p)
		if w != ws {
			return cwd, false
		}
		if rel == "." {
			continue
		}
		if _, err := git(ctx, ws.Root, "check-ignore", "-q", "--", rel); err == nil {
			return cwd, false // ignored: node_modules, vendor, build output
		}
	}
	return cwd, true
}

// firstOperand is the index of the first argument that is not a flag.
func firstOperand(args []string) int {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			return i
		}
	}
	return -1
}

// headish: HEAD or a commit of its own history named from it.
func headish(a string) bool {
	return a == "HEAD" || strings.HasPrefix(a, "HEAD~") || strings.HasPrefix(a, "HEAD^")
}

// workspaceDrift says what in the workspace the declaration does not vouch
// for ("" when nothing): a commit since the declared one that changed a
// file to content that is neither declared nor the agent's, a changed or
// untracked file of such content, a HEAD that does not descend from the
// declared commit.
func (h *Handler) workspaceDrift(ctx context.Context, ws *Workspace) string {
	m, err := h.loadManifest(ws)
	if err != nil {
		return err.Error()
	}
	ok := func(rel string, content []byte) bool {
		sum := sha256.Sum256(content)
		if m.Files[rel] == hex.EncodeToString(sum[:]) {
			return true
		}
		ids, err := h.ownContent(ctx, content)
		return err == nil && len(ids) > 0
	}
	head, err := git(ctx, ws.Root, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return err.Error()
	}
	if c := strings.TrimSpace(string(head)); c != ws.Commit {
		if _, err := git(ctx, ws.Root, "merge-base", "--is-ancestor", ws.Commit, c); err != nil {
			return "HEAD does not descend from the declared commit"
		}
		out, err := git(ctx, ws.Root, "diff", "--name-only", "-z", "--no-renames", ws.Commit, c)
		if err != nil {
			return err.Error()
		}
		for _, rel := range splitZ(out) {
			b, err := git(ctx, ws.Root, "cat-file", "blob", c+":"+rel)
			if err != nil {
				continue // deleted since
			}
			if !ok(rel, b) {
				return "a commit since the declared one changed " + rel
			}
		}
	}
	out, err := git(ctx, ws.Root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return err.Error()
	}
	for _, rec := range splitZ(out) {
		if len(rec) < 4 {
			return "git status: " + rec
		}
		rel := rec[3:]
		b, err := os.ReadFile(filepath.Join(ws.Root, filepath.FromSlash(rel)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || !ok(rel, b) {
			return "the working tree's " + rel + " is neither declared nor the agent's"
		}
	}
	return ""
}

func splitZ(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// splitCommand splits a command line into simple commands (at unquoted
// &&, ||, ; and |) of words, unquoting them. It is not ok on anything it
// does not follow: a variable or substitution ($, backquote), a subshell or
// group, a redirection other than 2>&1 and to /dev/null, a background &,
// a line break, an escape.
func splitCommand(line string) ([][]string, bool) {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() bool {
		end()
		if len(words) == 0 {
			return false
		}
		cmds = append(cmds, words)
		words = nil
		return true
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, false
			}
			q := line[i+1 : i+1+j]
			if strings.ContainsAny(q, "$`\\") {
				return nil, false
			}
			w.WriteString(q)
			inWord = true
			i += j + 1
		case c == '&' && strings.HasPrefix(line[i:], "&&"), c == '|' && strings.HasPrefix(line[i:], "||"):
			if !endCmd() {
				return nil, false
			}
			i++
		case c == ';' || c == '|':
			if !endCmd() {
				return nil, false
			}
		case c == '2' && !inWord && strings.HasPrefix(line[i:], "2>&1"):
			i += 3
		case c == '>' || c == '2' && !inWord && strings.HasPrefix(line[i:], "2>"):
			rest := strings.TrimPrefix(line[i:], "2")
			rest = strings.TrimPrefix(rest, ">")
			rest = strings.TrimLeft(rest, " ")
			if !strings.HasPrefix(rest, "/dev/null") {
				return nil, false
			}
			i = len(line) - len(rest) + len("/dev/null") - 1
		case strings.IndexByte("$`()<>&\\\n\r{}!", c) >= 0:
			return nil, false
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if !endCmd() {
		return nil, false
	}
	return cmds, true
}
