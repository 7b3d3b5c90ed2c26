package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"path/filepath"
)

// TestMain lets a test run the command in a process of its own: with
// PEDIGREE_CLI_TEST_MAIN=1 the test binary is pedigree.
func TestMain(m *testing.M) {
	if os.Getenv("PEDIGREE_CLI_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// pedigreeProcess starts pedigree in a child process; its stderr is read
// line by line through the returned reader.
func pedigreeProcess(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PEDIGREE_CLI_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(pr), &out
}

// Two records at once without a server: the second waits for the first's
// lock instead of failing. The directory is held by the test while both
// processes start, and released only once each has said it is waiting, so
// the two really overlap.
func TestRecordsWaitForTheLock(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	holder, err := pedigree.Open(context.Background(), c.dir)
	if err != nil {
		t.Fatal(err)
	}
	type child struct {
		cmd    *exec.Cmd
		stderr *bufio.Reader
		out    *bytes.Buffer
	}
	var kids []child
	t.Setenv("PEDIGREE_KEYS", filepath.Join(c.tmp, "keys")) // where the children find the engine key
	for _, content := range []string{"first", "second"} {
		cmd, stderr, out := pedigreeProcess(t, "--dir", c.dir, "--lock-wait", "10m", "record",
			"--as", "user:alice", "--key", c.key("user_alice"), "--session", "s1", "--content", content)
		kids = append(kids, child{cmd, stderr, out})
	}
	for i, k := range kids {
		line, err := k.stderr.ReadString('\n')
		if err != nil || !strings.Contains(line, "waiting up to 10m0s") {
			t.Fatalf("child %d did not say it waits: %q %v", i, line, err)
		}
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	for i, k := range kids {
		rest, _ := io.ReadAll(k.stderr)
		if err := k.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, rest)
		}
		if id := strings.TrimSpace(k.out.String()); len(id) != 64 {
			t.Fatalf("child %d printed %q", i, id)
		}
	}
	r := c.must("-o", "json", "verify").json(t)
	if r["ok"] != true || r["entries"] != float64(2) {
		t.Fatalf("verify: %v", r)
	}
}

// A directory still held after --lock-wait: exit 1, and the error says
// what to do.
func TestLockWaitRunsOut(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	holder, err := pedigree.Open(context.Background(), c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	cmd, stderr, _ := pedigreeProcess(t, "--dir", c.dir, "--lock-wait", "100ms", "registry", "list")
	msg, _ := io.ReadAll(stderr)
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitError {
		t.Fatalf("exit %d (%v): %s", code, err, msg)
	}
	for _, want := range []string{"in use by another pedigree process", "waited 100ms", "pedigree serve --dir " + c.dir, "--lock-wait"} {
		if !bytes.Contains(msg, []byte(want)) {
			t.Fatalf("error does not say %q:\n%s", want, msg)
		}
	}
}

// serve on a directory another process holds waits too, and then does not
// advise starting a server; on a directory a server already serves, it
// says so at once.
func TestServeOnAHeldDirectory(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	holder, err := pedigree.Open(t.Context(), c.dir)
	if err != nil {
		t.Fatal(err)
	}
	r := c.run("--lock-wait", "50ms", "serve")
	holder.Close()
	if r.code != ExitError || !strings.Contains(r.err, "'pedigree serve' needs the data directory alone") || strings.Contains(r.err, "start 'pedigree serve") {
		t.Fatalf("held: exit %d %s", r.code, r.err)
	}
	c.serve()
	r = c.run("serve")
	if r.code != ExitError || !strings.Contains(r.err, "a pedigree server is running on this data directory") {
		t.Fatalf("served: exit %d %s", r.code, r.err)
	}
}
