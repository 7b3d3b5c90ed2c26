package cli

import (
	"regexp"
	"strings"
	"testing"
)

// shellWords splits one line of shell into words, as far as an example
// needs: quotes group, and an unquoted |, >, <, &, ;, ) or # ends the command.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case strings.ContainsRune("|><&;#)", r):
			if inWord {
				words = append(words, cur.String())
			}
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Every runnable verb's --help has an example, and the example runs that
// verb with flags it takes. (TestReadmeQuickStart, in cmd/pedigree, pastes
// them all into a shell after the README's Quick start.)
func TestEveryVerbHasAnExample(t *testing.T) {
	all := Examples()
	if len(all) < 20 {
		t.Fatalf("only %d verbs", len(all))
	}
	for _, e := range all {
		if e.Example == "" {
			t.Errorf("%s: no Example in --help", e.Path)
			continue
		}
		found := false
		joined := strings.ReplaceAll(e.Example, "\\\n", " ")
		var commands []string // each command of each line: after a pipe, ;, && or $(
		for _, line := range strings.Split(joined, "\n") {
			commands = append(commands, commandStart.Split(line, -1)...)
		}
		for _, line := range commands {
			words := shellWords(strings.TrimSpace(line))
			if len(words) == 0 || words[0] != "pedigree" {
				continue
			}
			root := NewRootCommand(&app{})
			cmd, rest, err := root.Find(words[1:])
			if err != nil {
				t.Errorf("%s: example %q: %v", e.Path, line, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", e.Path, line, err)
			}
			if cmd.CommandPath() == e.Path {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: its example never runs it:\n%s", e.Path, e.Example)
		}
	}
}

var commandStart = regexp.MustCompile(`\$\(|\||;|&&`)

func TestShellWords(t *testing.T) {
	got := strings.Join(shellWords(`pedigree gate check --args '{"to": "1"}' --key "$KEYS/a key" | cat`), ",")
	if got != `pedigree,gate,check,--args,{"to": "1"},--key,$KEYS/a key` {
		t.Fatal(got)
	}
}
