package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/lineage"
)

// Custom slash commands. A prompt "/NAME ARGS" that names a command file
// reaches the model as two user turns the person did not type: Claude
// Code's tags of the command (<command-name>/NAME</command-name> and
// <command-args>ARGS</command-args>), then, isMeta, the file's text
// without its frontmatter, its placeholders ($ARGUMENTS, $ARGUMENTS[N],
// $N) filled with the typed arguments (or, without a placeholder, the
// arguments appended). Neither was typed, so both used to be recorded as
// content nobody vouches for, and a clean command's risky call was asked.
//
// The tag line says no more than the prompt: it counts as the prompt when
// it is exactly the tags of a prompt the person typed in this session
// (item.alts, and the canonical form commandPrompt records beside the
// prompt). The text after it is the file's, as Claude Code renders it for
// those arguments; when the read finds it after such a tag line, the hook
// reads each file /NAME can mean and records the text under the principal
// of the first whose rendering is the text:
//
//   - NAME.md (NAME "a:b" is a/b.md) in the person's own commands
//     directory ($CLAUDE_CONFIG_DIR/commands, else ~/.claude/commands): a
//     regular file of theirs, one link, that no other user may write (the
//     group may only when it is the person's own primary group): the
//     person, as their own configuration is (~/.claude.json, for MCP
//     servers);
//   - .claude/commands/NAME.md of the working directory or a directory
//     above it, when a workspace declaration vouches for its bytes: the
//     repository principal of the workspace's tier;
//   - nothing else: a repository's command nobody vouched for is the
//     repository writer's word, recorded as content nobody vouches for.
//
// A rendering fills placeholders with the typed arguments only, so text a
// file did not say can come only from what the person typed. A text that
// matches no rendering (a file changed since, `!` shell blocks whose
// output is inserted, a placeholder form the hook does not fill) is
// recorded as before: unverified, and a risky call after it is asked.
// Such a text is never taken from another session's entry of the same
// bytes (sync.go), except in the conversation a fork or resume inherits.

// commandName is a command's name: segments joined by ':' (a file in a
// subdirectory).
const commandName = `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}){0,3}`

// typedCommand is a typed slash command: its name and its arguments.
var typedCommand = regexp.MustCompile(`(?s)^/(` + commandName + `)(?:\s+(.*))?$`)

// commandTags is Claude Code's tag line of a slash command, and nothing
// more.
var commandTags = regexp.MustCompile(`(?s)^<command-message>([^<\n]*)</command-message>\n<command-name>/(` + commandName + `)</command-name>(?:\n<command-args>(.*)</command-args>)?$`)

// maxCommandBytes bounds a command file the hook reads.
const maxCommandBytes = 1 << 20

// commandTag is a slash command as its tag line names it.
type commandTag struct{ name, args string }

// typed is the prompt the tags stand for.
func (c commandTag) typed() string {
	if c.args == "" {
		return "/" + c.name
	}
	return "/" + c.name + " " + c.args
}

// canonicalCommand is a typed slash command as its tags will say it
// ("/NAME ARGS", the arguments trimmed), or "" for any other prompt.
func canonicalCommand(prompt string) string {
	m := typedCommand.FindStringSubmatch(strings.TrimSpace(prompt))
	if m == nil {
		return ""
	}
	return commandTag{m[1], strings.TrimSpace(m[2])}.typed()
}

// parseCommandTags reads a tag line.
func parseCommandTags(s string) (commandTag, bool) {
	m := commandTags.FindStringSubmatch(s)
	if m == nil {
		return commandTag{}, false
	}
	if msg, name := m[1], m[2]; msg != name && msg != name+" is running…" {
		return commandTag{}, false
	}
	return commandTag{m[2], m[3]}, true
}

// A commandFile is the file Claude Code runs for /NAME: a command
// (NAME.md) or a skill (NAME/SKILL.md), the person's own or a project's.
type commandFile struct {
	path  string
	dir   string // a skill's directory
	body  []byte
	own   bool // in the person's own directory
	skill bool
}

// resolveCommand is the file Claude Code runs for /NAME in cwd, as it
// picks it: the person's own command or skill first, else the nearest
// project's (the working directory's .claude, else the nearest above it);
// nil when none is there. A file of the person's own directory that is not
// theirs alone is still the file (own is false: nobody vouches for it).
func (h *Handler) resolveCommand(cwd, name string) *commandFile {
	rel := filepath.FromSlash(strings.ReplaceAll(name, ":", "/"))
	try := func(base string, own bool) *commandFile {
		for _, c := range []struct {
			rel   string
			skill bool
		}{{rel + ".md", false}, {filepath.Join(rel, "SKILL.md"), true}} {
			p := filepath.Join(base, c.rel)
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			f := &commandFile{path: p, dir: filepath.Dir(p), skill: c.skill}
			if own {
				if b, err := readOwnCommand(base, c.rel); err == nil {
					f.body, f.own = b, true
					return f
				}
			}
			f.body, _ = readRegular(p, maxCommandBytes)
			return f
		}
		return nil
	}
	if dir := userConfigDir(); dir != "" {
		for _, sub := range []string{"commands", "skills"} {
			if f := try(filepath.Join(dir, sub), true); f != nil {
				return f
			}
		}
	}
	if !filepath.IsAbs(cwd) {
		return nil
	}
	for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
		for _, sub := range []string{"commands", "skills"} {
			if f := try(filepath.Join(d, ".claude", sub), false); f != nil {
				return f
			}
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// owner is whom the file's text is recorded as: the person for their own,
// the repository principal for a project's file a workspace declaration
// vouches for, "" for any other.
func (h *Handler) owner(f *commandFile) (principal, label string) {
	switch {
	case f.own:
		return h.m.User, fmt.Sprintf("the person's own command (%s)", clip(f.path))
	case f.body != nil:
		if p, rule := h.vouched(f.path, f.body); p != "" {
			return p, fmt.Sprintf("a project's command (%s, %s)", clip(f.path), rule)
		}
	}
	return "", ""
}

// commandOwner is whom the text after a typed command's tags is recorded
// as: the owner of the file Claude Code runs for it, when the text is that
// file's rendering for the typed arguments; "" otherwise.
func (h *Handler) commandOwner(cwd, session string, tag commandTag, text []byte) (principal, label string) {
	f := h.resolveCommand(cwd, tag.name)
	if f == nil || f.body == nil || !f.rendersAs(tag.args, session, text) {
		return "", ""
	}
	p, l := h.owner(f)
	if p == "" {
		return "", ""
	}
	return p, "/" + tag.name + ": " + l
}

// unvouchedCommand records, before anything else of the turn, the text of
// the file /NAME runs when nobody vouches for it, as content nobody vouches
// for: the transcript may show it late (a session's first prompt, before
// Claude Code writes its transcript), or never (a command or skill whose
// frontmatter forks it into a subagent of its own), and the calls it leads
// to must be judged on it. A typed command and the Skill tool both run it.
func (h *Handler) unvouchedCommand(ctx context.Context, ev *Event, name, how string) error {
	f := h.resolveCommand(ev.CWD, name)
	if f == nil {
		return nil // a command of Claude Code's own, or a plugin's
	}
	if p, _ := h.owner(f); p != "" {
		return nil
	}
	text := f.body
	if text == nil {
		text = []byte(f.path) // unreadable: what it says is unknown
	}
	who, err := h.unverified()
	if err != nil {
		return err
	}
	_, err = h.recordLabelled(ctx, who, lineage.KindToolOutput, ev.SessionID, text, []lineage.Parent{},
		fmt.Sprintf("/%s (%s): a command nobody vouches for (%s)", name, how, clip(f.path)))
	return err
}

// userConfigDir is the person's own Claude Code directory.
func userConfigDir() string {
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".claude")
	}
	return ""
}

// readOwnCommand reads a file of the person's own directory: a regular
// file, reached without following a link, with one link, of this user's,
// that no other user may write (the group may only when it is the
// person's primary group), nor any folder from the person's Claude
// directory down to it (one who could would swap the file between the
// read and these checks). A folder may be a link (a dotfiles checkout's
// ~/.claude): the folder it leads to is the one checked.
func readOwnCommand(dir, rel string) ([]byte, error) {
	b, err := safefile.ReadFile(dir, rel, maxCommandBytes)
	if err != nil {
		return nil, err
	}
	for p, stat := filepath.Join(dir, rel), os.Lstat; ; p, stat = filepath.Dir(p), os.Stat {
		fi, err := stat(p)
		if err != nil {
			return nil, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok || int(st.Uid) != os.Getuid():
			return nil, fmt.Errorf("%s is not this user's", p)
		case fi.Mode().Perm()&0o002 != 0, fi.Mode().Perm()&0o020 != 0 && int(st.Gid) != os.Getgid():
			return nil, fmt.Errorf("%s may be written by others", p)
		}
		if p == filepath.Dir(dir) || p == filepath.Dir(p) {
			return b, nil
		}
	}
}

// frontmatter is Claude Code's: the block between two "---" lines at the
// start, and the white space after it.
var frontmatter = regexp.MustCompile(`(?s)^---\s*\n(.*?)---\s*\n?`)

// placeholder is an argument placeholder: $ARGUMENTS[N], $ARGUMENTS, $N,
// $name (a named argument), ${CLAUDE_SESSION_ID}.
var placeholder = regexp.MustCompile(`\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS|\$(\d+)|\$\{CLAUDE_SESSION_ID\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// rendersAs says whether text is the file's rendering for the typed
// arguments, as Claude Code renders it: without a byte-order mark and the
// frontmatter; $ARGUMENTS filled with the arguments, $ARGUMENTS[N] and $N
// with the Nth (from 0, split as a shell splits words) and left as they
// are past the last, a named argument (the frontmatter's arguments list)
// with its word, ${CLAUDE_SESSION_ID} with the session; \$ARGUMENTS is the
// literal; with no placeholder filled and arguments typed, the arguments
// appended; a skill's text after the line that names its directory. A '!'
// of the arguments may come escaped (unescapeBang). Every fill is the person's
// typed words or the session's ID, so no text a file does not say can
// pass.
func (f *commandFile) rendersAs(args, session string, text []byte) bool {
	body := strings.TrimPrefix(string(f.body), "\ufeff")
	var names []string
	if m := frontmatter.FindStringSubmatchIndex(body); m != nil {
		var fm struct {
			Arguments []string `json:"arguments"`
		}
		if j, err := yaml.YAMLToJSON([]byte(body[m[2]:m[3]])); err == nil {
			json.Unmarshal(j, &fm)
		}
		names, body = fm.Arguments, body[m[1]:]
	}
	words := shellWords(args)
	var out strings.Builder
	filled, last := false, 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(body, -1) {
		p := body[m[0]:m[1]]
		if m[4] >= 0 && m[1] < len(body) && isWordByte(body[m[1]]) {
			continue // $N before a word's character is text
		}
		if m[0] > 0 && body[m[0]-1] == '\\' && p == "$ARGUMENTS" {
			out.WriteString(body[last : m[0]-1])
			out.WriteString(p)
			last = m[1]
			continue
		}
		fill, ok := "", false
		switch {
		case p == "$ARGUMENTS":
			fill, ok = args, true
		case p == "${CLAUDE_SESSION_ID}":
			fill, ok = session, true
		case m[2] >= 0 || m[4] >= 0:
			var digits string
			if m[2] >= 0 {
				digits = body[m[2]:m[3]]
			} else {
				digits = body[m[4]:m[5]]
			}
			if n, err := strconv.Atoi(digits); err == nil && n < len(words) {
				fill, ok = words[n], true
			}
		default:
			if i := slices.Index(names, body[m[6]:m[7]]); i >= 0 && i < len(words) {
				fill, ok = words[i], true
			}
		}
		if !ok {
			continue // left as it is
		}
		out.WriteString(body[last:m[0]])
		out.WriteString(fill)
		last, filled = m[1], filled || p != "${CLAUDE_SESSION_ID}"
	}
	out.WriteString(body[last:])
	got := out.String()
	if !filled && args != "" {
		got += "\n\nARGUMENTS: " + args
	}
	if f.skill {
		got = "Base directory for this skill: " + f.dir + "\n\n" + got
	}
	return unescapeBang(got) == unescapeBang(string(text))
}

// unescapeBang undoes how Claude Code escapes a '!' of the typed arguments
// ("\!", and "!`" as "\! `"), on both sides of a comparison.
func unescapeBang(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\\! `", "!`"), `\!`, "!")
}

// shellWords splits typed arguments into words as a shell does: white space
// apart, quotes ('...', "...") holding a word together.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
