package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/cli"
)

// quickStartLine is one command of the README's Quick start, as a newcomer
// pastes it: continuation lines joined, comments dropped.
type quickStartLine struct {
	text string
	// want is the exit code the comment above it or beside it promises
	// ("exit 3"); every other line must exit 0.
	want int
	// from is where the line comes from when not the README.
	from string
}

func (l quickStartLine) where() string {
	if l.from == "" {
		return "README Quick start"
	}
	return l.from
}

var (
	quickStartSection = regexp.MustCompile(`(?ms)^## Quick start[^\n]*\n(.*?)^## `)
	shellBlock        = regexp.MustCompile("(?s)```(?:sh|bash|shell)\n(.*?)```")
	needsLine         = regexp.MustCompile(`^\s*# needs: (\S+)`)
	exitComment       = regexp.MustCompile(`\bexit ([0-9])\b`)
	inlineComment     = regexp.MustCompile(`\s{2,}#\s.*$`)
	// echoExit is how the block shows an exit code; the test takes the
	// command's own code instead.
	echoExit = regexp.MustCompile(`;\s*echo "exit \$\?"$`)
)

// quickStart extracts the Quick start's commands from the README.
func quickStart(t *testing.T, readme string) []quickStartLine {
	t.Helper()
	m := quickStartSection.FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no section headed '## Quick start'")
	}
	var lines []quickStartLine
	for _, b := range shellBlock.FindAllStringSubmatch(m[1], -1) {
		lines = append(lines, shellLines(b[1])...)
	}
	if len(lines) == 0 {
		t.Fatal("the Quick start has no shell block")
	}
	return lines
}

// shellLines splits a block of shell as a newcomer pastes it: continuation
// lines joined, comments dropped, each command with the exit code its
// comment promises.
func shellLines(block string) []quickStartLine {
	var lines []quickStartLine
	want, pending := 0, ""
	for _, raw := range strings.Split(block, "\n") {
		line := strings.TrimRight(raw, " \t")
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, pending = pending+line, ""
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			want = 0
		case strings.HasPrefix(trimmed, "#"):
			if e := exitComment.FindStringSubmatch(trimmed); e != nil {
				want, _ = strconv.Atoi(e[1])
			}
		default:
			if c := inlineComment.FindString(line); c != "" {
				if e := exitComment.FindStringSubmatch(c); e != nil {
					want, _ = strconv.Atoi(e[1])
				}
			}
			lines = append(lines, quickStartLine{text: echoExit.ReplaceAllString(inlineComment.ReplaceAllString(trimmed, ""), ""), want: want})
			want = 0
		}
	}
	return lines
}

// privateKeys lists the files under root that hold a private key.
func privateKeys(t *testing.T, root string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".key") {
			keys[path] = true
			return nil
		}
		if info, err := d.Info(); err == nil && info.Size() < 16<<10 {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte("PRIVATE KEY-----")) {
				keys[path] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestReadmeQuickStart pastes the README's Quick start into a fresh bash,
// line by line, as a newcomer would: in the checkout's root, with a fresh
// HOME and GOPATH and nothing of ours on PATH. Every line must run (no
// "command not found", no usage error), exit as its comment says (0 unless
// it says "exit N"), and leave no private key in the checkout. Then, in the
// same shell, it pastes every verb's --help example, with the same rules:
// each must work when pasted after the Quick start.
func TestReadmeQuickStart(t *testing.T) {
	var examples []quickStartLine
	for _, e := range cli.Examples() {
		if e.Example == "" {
			t.Errorf("%s --help has no example", e.Path)
			continue
		}
		if m := needsLine.FindStringSubmatch(e.Example); m != nil {
			if _, err := os.Stat(m[1]); err != nil {
				t.Logf("%s --help: its example needs %s, which is not here: not run", e.Path, m[1])
				continue
			}
		}
		lines := shellLines(e.Example)
		for i := range lines {
			lines[i].from = e.Path + " --help"
		}
		examples = append(examples, lines...)
	}
	pasteQuickStart(t, examples)
}

// pasteQuickStart runs the Quick start, then extra lines, in one fresh shell.
func pasteQuickStart(t *testing.T, extra []quickStartLine) {
	t.Helper()
	if testing.Short() {
		t.Skip("installs the command: not in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on PATH")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := append(quickStart(t, string(readme)), extra...)
	checkout, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	keysBefore := privateKeys(t, checkout)

	var script strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&script, "%s\necho \"$? %d\" >&3\n", l.text, i)
	}
	// A server the block stopped may still be draining; one it forgot is
	// stopped here. (A kill line that missed its job exits 1 and fails.)
	script.WriteString("kill $(jobs -pr) 2>/dev/null; wait\n")

	goEnv := func(name string) string {
		out, err := exec.Command(goBin, "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	tmp := t.TempDir()
	home, gopath, tmpdir := filepath.Join(tmp, "home"), filepath.Join(tmp, "gopath"), filepath.Join(tmp, "tmp")
	for _, d := range []string{home, gopath, tmpdir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home, "TMPDIR=" + tmpdir, "GOPATH=" + gopath, "GOTOOLCHAIN=local",
		// The module and build caches are the machine's: a newcomer's are
		// warm after 'go test', and the test must not go to the network.
		"GOMODCACHE=" + goEnv("GOMODCACHE"), "GOCACHE=" + goEnv("GOCACHE"),
	}
	for _, name := range []string{"GOFLAGS", "GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOSUMDB"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}

	rcRead, rcWrite, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bash, "--noprofile", "--norc")
	cmd.Dir, cmd.Env = checkout, env
	cmd.Stdin = strings.NewReader(script.String())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = []*os.File{rcWrite}
	cmd.WaitDelay = 10 * time.Second // a stray background job must not hold the test's pipes forever
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rcWrite.Close()
	var codes []int
	sc := bufio.NewScanner(rcRead)
	for sc.Scan() {
		var rc, i int
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &rc, &i); err != nil || i != len(codes) {
			t.Fatalf("bad exit-code line %q", sc.Text())
		}
		codes = append(codes, rc)
	}
	runErr := cmd.Wait()
	transcript := func() string { return "stdout:\n" + stdout.String() + "\nstderr:\n" + stderr.String() }
	if runErr != nil {
		t.Fatalf("bash: %v\n%s", runErr, transcript())
	}
	t.Logf("the Quick start, pasted:\n%s", transcript())

	if len(codes) != len(lines) {
		t.Fatalf("%d of %d lines ran\n%s", len(codes), len(lines), transcript())
	}
	for i, l := range lines {
		if codes[i] != l.want {
			t.Errorf("%s: line %d exits %d, its comment says %d: %s", l.where(), i+1, codes[i], l.want, l.text)
		}
	}
	for _, bad := range []string{"command not found", "Run 'pedigree --help' for usage", "No such file or directory"} {
		if strings.Contains(stderr.String(), bad) {
			t.Errorf("the Quick start's stderr says %q", bad)
		}
	}
	for k := range privateKeys(t, checkout) {
		if !keysBefore[k] {
			t.Errorf("the Quick start left a private key in the checkout: %s", k)
			os.Remove(k)
		}
	}
	if t.Failed() {
		t.Logf("lines as run:\n%s", script.String())
	}
}
