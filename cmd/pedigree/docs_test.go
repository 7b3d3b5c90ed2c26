package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/cli"
)

var (
	fencedBlock = regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```")
	// pedigreeCall is a pedigree command inside a shell line: at its start,
	// after a separator, or inside $( ... ).
	pedigreeCall = regexp.MustCompile(`(?:^|[;&|(]\s*|\$\()\s*pedigree\s+([^;&|)#]*)`)
)

// docCommand is one pedigree command a page shows.
type docCommand struct {
	page string
	args []string
}

// TestDocsCommandsParse holds every pedigree command that the README and
// the pages in docs/ show (in shell blocks, and as an mcpServers entry's
// command and args in JSON blocks) to the command as it is: the verb exists
// and takes every flag given. The Quick start and the verbs' --help examples
// are run whole by TestReadmeQuickStart; this catches a page that names a
// verb or flag that was renamed or never existed.
func TestDocsCommandsParse(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md", "SECURITY.md", "CHANGELOG.md"}, pages...)
	var cmds []docCommand
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if page == "CHANGELOG.md" || page == "docs/performance.md" {
			continue // history: commands as they were
		}
		for _, m := range fencedBlock.FindAllStringSubmatch(string(b), -1) {
			if m[1] == "text" {
				continue // what a command prints
			}
			if m[1] == "json" {
				cmds = append(cmds, jsonCommands(t, page, m[2])...)
				continue
			}
			cmds = append(cmds, shellCommands(page, m[2])...)
		}
	}
	if len(cmds) < 10 {
		t.Fatalf("found only %d pedigree commands in the docs: is the extraction broken?", len(cmds))
	}
	for _, c := range cmds {
		if err := cli.CheckCommandLine(c.args); err != nil {
			t.Errorf("%s shows `pedigree %s`: %v", c.page, strings.Join(c.args, " "), err)
		}
	}
}

func shellCommands(page, block string) []docCommand {
	var out []docCommand
	block = strings.ReplaceAll(block, "\\\n", " ")
	for _, line := range strings.Split(block, "\n") {
		for _, m := range pedigreeCall.FindAllStringSubmatch(line, -1) {
			out = append(out, docCommand{page, shellWords(m[1])})
		}
	}
	return out
}

// jsonCommands finds {"command": "pedigree", "args": [...]} objects.
func jsonCommands(t *testing.T, page, block string) []docCommand {
	var v any
	if err := json.Unmarshal([]byte(block), &v); err != nil {
		t.Errorf("%s: a json block does not parse: %v", page, err)
		return nil
	}
	var out []docCommand
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["command"] == "pedigree" {
				var args []string
				for _, a := range x["args"].([]any) {
					args = append(args, a.(string))
				}
				out = append(out, docCommand{page, args})
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// shellWords splits a command's arguments as the shell would for parsing
// flags: quotes group, and a quoted or unquoted word is one argument.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quote, started := rune(0), false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, started = r, true
		case r == ' ' || r == '\t':
			if started {
				words = append(words, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		words = append(words, cur.String())
	}
	return words
}
