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
	"git":    {"status", "diff", "log", "show", "rev-parse", "ls-files", "add", "commit"},
	"go":     {"test", "build", "vet", "fmt"},
	"gofmt":  nil,
	"ls":     nil,
	"pwd":    nil,
	"wc":     nil,
	"cat":    nil,
	"head":   nil,
	"tail":   nil,
	"grep":   nil,
	"echo":   nil,
	"true":   nil,
	"cd":     nil,
	"sort":   nil,
	"uniq":   nil,
	"diff":   nil,
	"printf": nil,
}

// localFlags are the flags each local command may carry and still read
// only what its operands name (red team: diff --from-file, git blame
// --contents, grep -d recurse, git log --all, go test -exec, git grep
// --no-index each read what no operand named). Any other flag leaves the
// output unverified. A flag ending in "=" takes its value joined ("-run=X")
// or as the next word; one ending in "#" takes a number.
var localFlags = map[string][]string{
	"ls":            {"-l", "-a", "-A", "-h", "-1", "-t", "-S", "-r", "-d", "-F", "-la", "-al", "-lh", "-lah", "-alh", "-ltr", "-lt", "--color", "--color="},
	"wc":            {"-l", "-w", "-c", "-m"},
	"cat":           {"-n", "-A", "-v", "-e", "-t"},
	"head":          {"-n#", "-c#"},
	"tail":          {"-n#", "-c#"},
	"grep":          {"-n", "-i", "-l", "-c", "-v", "-w", "-x", "-E", "-F", "-H", "-h", "-o", "-q", "-s", "-in", "-ni", "-il", "-li", "-e=", "--color", "--color="},
	"sort":          {"-n", "-r", "-u", "-k#", "-t="},
	"uniq":          {"-c", "-d", "-u"},
	"diff":          {"-u", "-q", "--brief", "-U#"},
	"gofmt":         {"-l", "-d", "-s"},
	"git status":    {"-s", "--short", "-b", "--branch", "--porcelain", "--porcelain=v1", "--porcelain=v2", "-uno", "-unormal", "--untracked-files=no", "--untracked-files=normal"},
	"git diff":      {"--stat", "--name-only", "--name-status", "--numstat", "--shortstat", "-U#", "--color", "--color=", "--no-color", "-w", "--check"},
	"git log":       {"--oneline", "-n#", "--stat", "-p", "--patch", "--format=", "--pretty=", "--graph", "--decorate", "--no-decorate", "--color", "--no-color", "--name-only", "--name-status", "--reverse"},
	"git show":      {"--stat", "-p", "--patch", "--format=", "--pretty=", "--oneline", "--name-only", "--name-status", "--no-color", "--color"},
	"git rev-parse": {"--short", "--abbrev-ref", "--show-toplevel", "--verify", "--git-dir", "--is-inside-work-tree"},
	"git ls-files":  {"-z"},
	"git add":       {"-A", "--all", "-u", "--update"},
	"git commit":    {"-m=", "-am=", "-a", "--all", "-q", "--quiet"},
	"go test":       {"-v", "-run=", "-count#", "-race", "-short", "-cover", "-bench=", "-benchtime=", "-timeout=", "-failfast", "-json", "-shuffle="},
	"go build":      {"-v", "-race"},
	"go vet":        {"-v"},
	"go fmt":        {"-n"},
}

// flagOK says whether flag (and, when it takes a value as the next word,
// that word, reported by skip) is one the command may carry.
func flagOK(cmd, flag, next string) (ok, skip bool) {
	for _, f := range localFlags[cmd] {
		switch {
		case strings.HasSuffix(f, "#"):
			base := strings.TrimSuffix(f, "#")
			if flag == base {
				return isNumber(next), true
			}
			if rest, found := strings.CutPrefix(flag, base); found && (isNumber(rest) || isNumber(strings.TrimPrefix(rest, "="))) {
				return true, false
			}
		case strings.HasSuffix(f, "="):
			base := strings.TrimSuffix(f, "=")
			if flag == base {
				return next != "", true
			}
			if strings.HasPrefix(flag, f) {
				return true, false
			}
		case flag == f:
			return true, false
		}
	}
	// git log -5, head -20: a count.
	if (cmd == "git log" || cmd == "head" || cmd == "tail") && isNumber(strings.TrimPrefix(flag, "-")) {
		return true, false
	}
	return false, false
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
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
	if !h.declaredPath(ctx, ws, rel) {
		return "", ""
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
	key := name
	if sub != "" {
		key = name + " " + sub
	}
	searches := name == "grep"
	var paths []string
	operands := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
		case strings.HasPrefix(a, "-") && a != "-":
			if name == "echo" || name == "printf" {
				continue // the agent's own words
			}
			next := ""
			if i+1 < len(args) {
				next = args[i+1]
			}
			ok, skip := flagOK(key, a, next)
			if !ok {
				return cwd, false
			}
			if skip {
				if searches && a == "-e" {
					operands++ // the pattern
				}
				i++
			}
		case name == "echo" || name == "printf":
			// the agent's own words
		case name == "go":
			// packages of this module, checked below
			if !strings.HasPrefix(a, ".") || strings.Contains(a, "..") && a != "./..." && !strings.HasSuffix(a, "/...") {
				return cwd, false // another module's packages, or one outside
			}
			paths = append(paths, strings.TrimSuffix(strings.TrimSuffix(a, "/..."), "..."))
		case name == "git" && headish(a):
		case searches && operands == 0:
			operands++ // the pattern
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
	if name == "git" && (sub == "log" || sub == "show") && !h.ownHistory(ctx, ws) {
		return cwd, false
	}
	if name == "git" && sub == "commit" {
		// What a commit prints is git's, but hooks run on it: a
		// workspace with any hook (.git/hooks, core.hooksPath) is not
		// read by git alone (red team: a pre-commit hook's output).
		if hooked(ctx, ws) {
			return cwd, false
		}
		paths = nil // what it commits is checked by the drift below
	}
	if name == "go" {
		// go test ./... compiles and runs every package under the
		// directory, ignored ones (node_modules, vendor) included.
		if len(paths) == 0 {
			paths = []string{"."}
		}
		out, err := git(ctx, ws.Root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", "*.go")
		if err != nil || len(out) > 0 {
			return cwd, false
		}
	}
	if sub == "add" {
		paths = nil // what it stages is checked by the drift below, not read out
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
		if w != ws || !h.declaredPath(ctx, ws, rel) {
			return cwd, false
		}
	}
	return cwd, true
}

// declaredPath says whether what is under rel in the workspace is what the
// declaration vouches for: not ignored (node_modules, vendor, build
// output), not in .git (hooks, config, objects), not in or above a
// submodule (another repository, whose files the manifest does not hold).
func (h *Handler) declaredPath(ctx context.Context, ws *Workspace, rel string) bool {
	if rel != "." {
		for _, part := range strings.Split(rel, "/") {
			if part == ".git" {
				return false
			}
		}
		if _, err := git(ctx, ws.Root, "check-ignore", "-q", "--", rel); err == nil {
			return false
		}
	}
	subs, err := submodules(ctx, ws)
	if err != nil {
		return false
	}
	for _, s := range subs {
		if rel == "." || rel == s || strings.HasPrefix(rel, s+"/") || strings.HasPrefix(s, rel+"/") {
			return false
		}
	}
	return true
}

// submodules lists the workspace's gitlinks (mode 160000 in the index).
func submodules(ctx context.Context, ws *Workspace) ([]string, error) {
	out, err := git(ctx, ws.Root, "ls-files", "-s", "-z")
	if err != nil {
		return nil, err
	}
	var subs []string
	for _, rec := range splitZ(out) {
		if strings.HasPrefix(rec, "160000 ") {
			if _, path, ok := strings.Cut(rec, "\t"); ok {
				subs = append(subs, path)
			}
		}
	}
	return subs, nil
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
		// The agent's own write counts only when it was trusted: a
		// write made on the strength of a web page keeps its taint
		// (red team: read back with cat, it was the repository's).
		return h.trustedOwn(ctx, content)
	}
	// Files git status cannot see: skip-worktree and assume-unchanged.
	if out, err := git(ctx, ws.Root, "ls-files", "-v", "-z"); err != nil {
		return err.Error()
	} else {
		for _, rec := range splitZ(out) {
			if len(rec) > 2 && rec[0] != 'H' {
				return "git hides changes to " + rec[2:] + " (skip-worktree or assume-unchanged)"
			}
		}
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
		if rec[0] != ' ' && rec[0] != '?' && rec[0] != 'D' {
			// Staged: what the index holds is what git diff --cached
			// and a commit show.
			b, err := git(ctx, ws.Root, "show", ":"+rel)
			if err != nil || !ok(rel, b) {
				return "the index's " + rel + " is neither declared nor the agent's"
			}
		}
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

// ownHistory says whether every commit since the declared one is the
// agent's own: with a message the agent itself wrote in a git commit -m it ran in a trusted context (recorded as
// its memory at PostToolUse, see commitMessage). Commit messages and
// authors are not file content: the drift check does not see them (red
// team: an empty or net-zero commit since carried an outsider's message).
func (h *Handler) ownHistory(ctx context.Context, ws *Workspace) bool {
	head, err := git(ctx, ws.Root, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return false
	}
	if strings.TrimSpace(string(head)) == ws.Commit {
		return true
	}
	out, err := git(ctx, ws.Root, "log", "-z", "--format=%B", ws.Commit+"..HEAD")
	if err != nil {
		return false
	}
	for _, msg := range splitZ(out) {
		if !h.trustedOwn(ctx, []byte(strings.TrimSpace(msg))) {
			return false
		}
	}
	return true
}

// trustedOwn says whether content is something the agent wrote itself in a
// trusted context (an entry of its own, trusted effective and reach tiers).
func (h *Handler) trustedOwn(ctx context.Context, content []byte) bool {
	ids, err := h.ownContent(ctx, content)
	if err != nil {
		return false
	}
	for _, id := range ids {
		if v, err := h.b.Show(ctx, id); err == nil && v.Node != nil && v.Node.Effective.Trusted() && v.Node.Reach.Trusted() {
			return true
		}
	}
	return false
}

// hooked says whether git may run a hook in the workspace.
func hooked(ctx context.Context, ws *Workspace) bool {
	if out, err := git(ctx, ws.Root, "config", "core.hooksPath"); err == nil && strings.TrimSpace(string(out)) != "" {
		return true
	}
	dir, err := git(ctx, ws.Root, "rev-parse", "--git-path", "hooks")
	if err != nil {
		return true
	}
	hooks := strings.TrimSpace(string(dir))
	if !filepath.IsAbs(hooks) {
		hooks = filepath.Join(ws.Root, hooks)
	}
	entries, err := os.ReadDir(hooks)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sample") {
			return true
		}
	}
	return false
}

// commitMessage is the message of a command line that is one git commit
// with one -m (or -am), as git stores it (trimmed), or nil.
func commitMessage(line string) []byte {
	cmds, ok := splitCommand(line)
	if !ok || len(cmds) != 1 {
		return nil
	}
	w := cmds[0]
	if len(w) < 2 || w[0] != "git" || w[1] != "commit" {
		return nil
	}
	var msg []byte
	for i := 2; i < len(w); i++ {
		if (w[i] == "-m" || w[i] == "-am") && i+1 < len(w) {
			if msg != nil {
				return nil // several paragraphs: not matched
			}
			msg = []byte(strings.TrimSpace(w[i+1]))
			i++
		}
	}
	return msg
}
