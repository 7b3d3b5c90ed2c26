package hook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/lineage"
)

// Custom slash commands. A prompt "/NAME ARGS" that names a command file
// reaches the model as two user turns the person did not type: Claude
// Code's tags of the command (<command-name>/NAME</command-name> and its
// arguments), then the file's text with $ARGUMENTS replaced by ARGS
// (isMeta). The tags say no more than the prompt, so the transcript's tag
// line is read as another form of it (commandTags, transcript.go). The text
// is the file's: at the prompt the hook reads each file the name can mean
// and records its text, rendered as Claude Code renders it, under the
// principal the file deserves:
//
//   - NAME.md in the person's own commands directory
//     ($CLAUDE_CONFIG_DIR/commands, else ~/.claude/commands), a regular
//     file of theirs with one link that nobody else may write: the person,
//     as their own configuration is (~/.claude.json, for MCP servers);
//   - NAME.md in .claude/commands of the working directory or a directory
//     above it, when a workspace declaration vouches for the file's bytes:
//     the repository principal of the workspace's tier;
//   - nothing else: a project's command nobody vouched for is the
//     repository writer's word, and its text is recorded from the
//     transcript as content nobody vouches for, as before.
//
// What the hook records counts only where the transcript's text is the
// same, byte for byte (the content index): a file changed between the
// prompt and its expansion, a rendering the hook does not reproduce
// (positional arguments, `!` commands, @-files in the file), the other
// scope's file of the same name, each leaves the transcript's text
// recorded as unverified, so a risky call that follows it is asked.

// commandPrompt is a typed slash command: its name and its arguments.
var commandPrompt = regexp.MustCompile(`^/([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})(?:[ \t]+([^\n]*))?$`)

// maxCommandBytes bounds a command file the hook reads.
const maxCommandBytes = 1 << 20

// commandFile is a command file the prompt may mean.
type commandFile struct {
	path  string
	text  []byte // as Claude Code sends it
	owner string // the principal it is recorded as
	label string
}

// commands records the text of the command files a slash-command prompt
// may mean, each under the principal it deserves (see above).
func (h *Handler) commands(ctx context.Context, ev *Event) error {
	m := commandPrompt.FindStringSubmatch(strings.TrimSpace(*ev.Prompt))
	if m == nil {
		return nil
	}
	name, args := m[1], strings.TrimSpace(m[2])
	recorded := map[string]bool{}
	for _, f := range h.commandFiles(ev.CWD, name, args) {
		if recorded[string(f.text)] {
			continue
		}
		recorded[string(f.text)] = true
		if _, err := h.recordLabelled(ctx, f.owner, lineage.KindToolOutput, ev.SessionID, f.text, []lineage.Parent{}, f.label); err != nil {
			return err
		}
	}
	return nil
}

// commandFiles are the files named NAME.md the hook can attribute, with
// their text rendered for args.
func (h *Handler) commandFiles(cwd, name, args string) []commandFile {
	var out []commandFile
	if dir := userCommandsDir(); dir != "" {
		b, err := safefile.ReadFile(dir, name+".md", maxCommandBytes)
		if err == nil {
			if fi, serr := os.Lstat(filepath.Join(dir, name+".md")); serr == nil && fi.Mode().Perm()&0o022 == 0 {
				out = append(out, commandFile{path: filepath.Join(dir, name+".md"), text: renderCommand(b, args), owner: h.m.User,
					label: fmt.Sprintf("/%s: the person's own command (%s)", name, clip(filepath.Join(dir, name+".md")))})
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			h.log.Warn("pedigree hook: the person's command file is not theirs alone: its text is not attributed", "file", filepath.Join(dir, name+".md"), "error", err)
		}
	}
	if !filepath.IsAbs(cwd) {
		return out
	}
	for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".claude", "commands", name+".md")
		if b, err := readRegular(p); err == nil {
			if owner, rule := h.vouched(p, b); owner != "" {
				out = append(out, commandFile{path: p, text: renderCommand(b, args), owner: owner,
					label: fmt.Sprintf("/%s: a project's command (%s, %s)", name, clip(p), rule)})
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return out
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

// readRegular reads a regular file (not a FIFO, a device or a directory)
// of at most maxCommandBytes.
func readRegular(p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxCommandBytes {
		return nil, fmt.Errorf("%s is not a command file", p)
	}
	return os.ReadFile(p)
}

// renderCommand is a command file's text as Claude Code sends it: without
// its frontmatter, with $ARGUMENTS replaced by args.
func renderCommand(b []byte, args string) []byte {
	s := string(b)
	if rest, ok := strings.CutPrefix(s, "---\n"); ok {
		if i := strings.Index(rest, "\n---\n"); i >= 0 {
			s = rest[i+len("\n---\n"):]
		} else if strings.HasPrefix(rest, "---\n") {
			s = rest[len("---\n"):]
		}
	}
	return []byte(strings.ReplaceAll(s, "$ARGUMENTS", args))
}

// commandTags reads Claude Code's tag line of a slash command, exactly as
// it writes it and nothing more: the prompt as typed ("/NAME ARGS"), or
// false.
var commandTags = regexp.MustCompile(`^<command-message>([^<\n]*)</command-message>\n<command-name>/([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})</command-name>(?:\n<command-args>([^<\n]*)</command-args>)?$`)

func commandTyped(s string) (string, bool) {
	m := commandTags.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	if msg, name := m[1], m[2]; msg != name && msg != name+" is running…" {
		return "", false
	}
	if m[3] == "" {
		return "/" + m[2], true
	}
	return "/" + m[2] + " " + m[3], true
}
