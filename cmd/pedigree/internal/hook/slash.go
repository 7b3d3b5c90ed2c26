package hook

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/pedigree-ai/pedigree/internal/safefile"
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

// commandOwner is whom a command's text is recorded as: the principal of
// the first file /NAME can mean whose rendering for the tag's arguments is
// text, and why; "" when none is.
func (h *Handler) commandOwner(cwd string, tag commandTag, text []byte) (principal, label string) {
	rel := filepath.FromSlash(strings.ReplaceAll(tag.name, ":", "/")) + ".md"
	if dir := userCommandsDir(); dir != "" {
		if b, err := readOwnCommand(dir, rel); err == nil && rendersAs(b, tag.args, text) {
			return h.m.User, fmt.Sprintf("/%s: the person's own command (%s)", tag.name, clip(filepath.Join(dir, rel)))
		}
	}
	if !filepath.IsAbs(cwd) {
		return "", ""
	}
	for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".claude", "commands", rel)
		if b, err := readCommand(p); err == nil && rendersAs(b, tag.args, text) {
			if owner, rule := h.vouched(p, b); owner != "" {
				return owner, fmt.Sprintf("/%s: a project's command (%s, %s)", tag.name, clip(p), rule)
			}
		}
		if filepath.Dir(d) == d {
			return "", ""
		}
	}
}

// userCommandsDir is the person's own commands directory.
func userCommandsDir() string {
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Join(d, "commands")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".claude", "commands")
	}
	return ""
}

// readOwnCommand reads a file of the person's own commands directory: a
// regular file, reached without following a link, with one link, of this
// user's, that no other user may write.
func readOwnCommand(dir, rel string) ([]byte, error) {
	b, err := safefile.ReadFile(dir, rel, maxCommandBytes)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(filepath.Join(dir, rel))
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok || int(st.Uid) != os.Getuid():
		return nil, fmt.Errorf("%s is not this user's", rel)
	case fi.Mode().Perm()&0o002 != 0, fi.Mode().Perm()&0o020 != 0 && int(st.Gid) != os.Getgid():
		return nil, fmt.Errorf("%s may be written by others", rel)
	}
	return b, nil
}

// readCommand reads a project's command file: a regular file (a link is
// followed; what it leads to must be regular), at most maxCommandBytes
// read whatever its size says, never blocking on a FIFO or a device.
func readCommand(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCommandBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCommandBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxCommandBytes)
	}
	return b, nil
}

// frontmatter is Claude Code's: the block between two "---" lines at the
// start, and the white space after it.
var frontmatter = regexp.MustCompile(`(?s)^---\s*\n.*?---\s*\n?`)

// placeholder is an argument placeholder: $ARGUMENTS[N], $ARGUMENTS, $N.
var placeholder = regexp.MustCompile(`\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS|\$(\d+)`)

// rendersAs says whether text is file b rendered for the typed arguments
// args: its body (frontmatter removed) with every placeholder filled (the
// whole arguments, or the Nth word, counted from 0 or from 1), or, without
// a placeholder, with the arguments appended as Claude Code appends them. A
// '!' of the arguments may come escaped ("\!"), as Claude Code sends it.
func rendersAs(b []byte, args string, text []byte) bool {
	body := string(b)
	if loc := frontmatter.FindStringIndex(body); loc != nil {
		body = body[loc[1]:]
	}
	want := strings.ReplaceAll(string(text), `\!`, "!")
	words := strings.Fields(args)
	for _, from := range []int{0, 1} {
		var got strings.Builder
		found, last := false, 0
		for _, m := range placeholder.FindAllStringSubmatchIndex(body, -1) {
			if m[4] >= 0 && m[1] < len(body) && isWordByte(body[m[1]]) {
				continue // $N before a word's character is text
			}
			got.WriteString(body[last:m[0]])
			last, found = m[1], true
			if m[2] < 0 && m[4] < 0 {
				got.WriteString(args)
				continue
			}
			var digits string
			if m[2] >= 0 {
				digits = body[m[2]:m[3]]
			} else {
				digits = body[m[4]:m[5]]
			}
			if n, err := strconv.Atoi(digits); err == nil && n-from >= 0 && n-from < len(words) {
				got.WriteString(words[n-from])
			}
		}
		got.WriteString(body[last:])
		out := got.String()
		if !found && args != "" {
			out = body + "\n\nARGUMENTS: " + args
		}
		if strings.ReplaceAll(out, `\!`, "!") == want {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
