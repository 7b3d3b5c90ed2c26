package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
)

// onDemandHook runs 'pedigree hook claude' as the command does, allowed to
// start the directory's server with the built binary. The server it starts
// inherits the process's environment: the test sets PEDIGREE_KEYS there.
func (c *cliEnv) onDemandHook(bin string, event []byte, env map[string]string) result {
	var out, errw bytes.Buffer
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return c.getenv(k)
	}
	a := &app{in: bytes.NewReader(event), out: &out, errw: &errw, getenv: getenv, clock: c.clock, autostart: true, executable: bin}
	code := a.run(c.t.Context(), []string{"--dir", c.dir, "hook", "claude"})
	return result{out.String(), errw.String(), code}
}

// onDemandEnv is a directory set up for the hook, the built command, and
// PEDIGREE_KEYS in the process's environment (the servers the hook starts
// inherit it); a server on demand left at the end is stopped before the
// directory is removed.
func onDemandEnv(t *testing.T) (*cliEnv, string) {
	t.Helper()
	bin := pedigreeBinary(t)
	c := newEnv(t)
	c.hookSetup()
	t.Setenv("PEDIGREE_KEYS", filepath.Join(c.tmp, "keys"))
	t.Cleanup(func() { server.StopOnDemand(context.Background(), c.dir, nil) })
	return c, bin
}

type serveJSON struct {
	PID      int    `json:"pid"`
	IdleExit string `json:"idle_exit"`
}

func readServeJSON(t *testing.T, dir string) (serveJSON, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, server.InfoFile))
	if errors.Is(err, os.ErrNotExist) {
		return serveJSON{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var s serveJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s, true
}

// stopped waits until pid has exited (a zombie counts: its parent, the
// test, reaps it when it likes).
func stopped(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestHookServesOnDemand: the first hook event of a directory no server
// holds starts 'serve --idle-exit' (serve.json says so), later events go
// through it (the store stays held by that one process), and a verb that
// needs the store itself stops it instead of refusing; PEDIGREE_HOOK_SERVE=off
// opens the store in the event, as before. A server a person started is
// theirs: the verb is refused as before, and the server runs on.
func TestHookServesOnDemand(t *testing.T) {
	c, bin := onDemandEnv(t)

	if d, _ := permission(t, c.onDemandHook(bin, fixture(t, "user_prompt_submit"), nil)); d != "" {
		t.Fatalf("the prompt answered %q", d)
	}
	first, ok := readServeJSON(t, c.dir)
	if !ok || first.IdleExit != serverIdleExit.String() || first.PID == 0 {
		t.Fatalf("no server started on demand: serve.json %+v %v", first, ok)
	}
	t.Cleanup(func() { syscall.Kill(first.PID, syscall.SIGTERM); stopped(first.PID, 10*time.Second) })
	for _, name := range []string{"pre_tool_use_read", "post_tool_use_read"} {
		if r := c.onDemandHook(bin, fixture(t, name), nil); r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.err)
		}
	}
	if d, reason := permission(t, c.onDemandHook(bin, fixture(t, "pre_tool_use_bash"), nil)); d != "ask" {
		t.Fatalf("the Bash call after the poisoned Read, through the server: %q (%s)", d, reason)
	}
	if again, _ := readServeJSON(t, c.dir); again.PID != first.PID {
		t.Fatalf("a second server started: %d, then %d", first.PID, again.PID)
	}
	if _, err := pedigree.Open(t.Context(), c.dir); !errors.Is(err, pedigree.ErrLocked) {
		t.Fatalf("the store is not held by the server on demand: %v", err)
	}

	// A verb that needs the store stops the server on demand and goes on.
	c.must("registry", "seal")
	if !stopped(first.PID, 5*time.Second) {
		t.Fatal("registry seal left the server on demand running")
	}
	if _, ok := readServeJSON(t, c.dir); ok {
		t.Fatal("serve.json is left behind")
	}

	// Off: the event opens the store itself and starts nothing.
	off := map[string]string{hookServeEnv: "off"}
	if d, _ := permission(t, c.onDemandHook(bin, fixture(t, "pre_tool_use_bash"), off)); d != "ask" {
		t.Fatalf("with %s=off: %q", hookServeEnv, d)
	}
	if s, ok := readServeJSON(t, c.dir); ok {
		t.Fatalf("%s=off started a server: %+v", hookServeEnv, s)
	}

	// A person's server (no --idle-exit) is left alone: the verb is
	// refused as it always was, and the hook goes through that server.
	stop := c.serve()
	if r := c.run("registry", "seal"); r.code == 0 || !strings.Contains(r.err, errServed.Error()) {
		t.Fatalf("registry seal beside a person's server: exit %d: %s", r.code, r.err)
	}
	if d, _ := permission(t, c.onDemandHook(bin, fixture(t, "pre_tool_use_bash"), nil)); d != "ask" {
		t.Fatalf("through a person's server: %q", d)
	}
	if s, _ := readServeJSON(t, c.dir); s.IdleExit != "" {
		t.Fatalf("the hook started a server beside a person's: %+v", s)
	}
	stop()
}

// TestStopOnDemandSignalsOnlyTheServer: whoever writes the data directory
// can rewrite serve.json's pid; stopping a server on demand signals the
// process that holds the socket (SO_PEERCRED), never the pid the file
// names, and refuses when the two differ.
func TestStopOnDemandSignalsOnlyTheServer(t *testing.T) {
	c, bin := onDemandEnv(t)
	if r := c.onDemandHook(bin, fixture(t, "user_prompt_submit"), nil); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	s, ok := readServeJSON(t, c.dir)
	if !ok || s.IdleExit == "" {
		t.Fatalf("no server on demand: %+v", s)
	}
	t.Cleanup(func() { syscall.Kill(s.PID, syscall.SIGTERM); stopped(s.PID, 10*time.Second) })

	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })
	path := filepath.Join(c.dir, server.InfoFile)
	b, _ := os.ReadFile(path)
	var m map[string]any
	json.Unmarshal(b, &m)
	m["pid"] = bystander.Process.Pid
	forged, _ := json.Marshal(m)
	if err := os.WriteFile(path, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	err := server.StopOnDemand(t.Context(), c.dir, c.clock)
	if !errors.Is(err, server.ErrUntrustedServer) {
		t.Fatalf("a forged pid: %v, want ErrUntrustedServer", err)
	}
	if stopped(bystander.Process.Pid, 200*time.Millisecond) {
		t.Fatal("the process serve.json was pointed at was signalled")
	}
	if stopped(s.PID, 200*time.Millisecond) {
		t.Fatal("the server stopped, though the refusal said otherwise")
	}
	if r := c.run("registry", "seal"); r.code == 0 {
		t.Fatal("registry seal went on beside a server it could not stop")
	}
}

// TestServerOnDemandStopsWhenIdleOrRemoved: a server started with
// --idle-exit stops by itself once idle, and at once (within its tick) when
// its serve.json is removed, or the whole directory with what it wrote (its
// store is not closed then: Badger would retry its flush into the removed
// directory for ever), so that a trial's or a test's directory does not
// keep a process alive.
func TestServerOnDemandStopsWhenIdleOrRemoved(t *testing.T) {
	c, bin := onDemandEnv(t)
	start := func(idle string) int {
		t.Helper()
		a := &app{in: strings.NewReader(""), out: &bytes.Buffer{}, errw: &bytes.Buffer{}, getenv: c.getenv, clock: c.clock, executable: bin, dir: c.dir}
		sc, err := a.startServer(t.Context(), []string{"--idle-exit", idle}, 30*time.Second, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		sc.Close()
		s, _ := readServeJSON(t, c.dir)
		t.Cleanup(func() { syscall.Kill(s.PID, syscall.SIGTERM); stopped(s.PID, 10*time.Second) })
		return s.PID
	}
	pid := start("300ms")
	if !stopped(pid, 10*time.Second) {
		t.Fatal("the server did not stop when idle")
	}
	if _, ok := readServeJSON(t, c.dir); ok {
		t.Fatal("serve.json is left behind")
	}
	pid = start("1h")
	if err := os.Remove(filepath.Join(c.dir, server.InfoFile)); err != nil {
		t.Fatal(err)
	}
	if !stopped(pid, 10*time.Second) {
		t.Fatal("the server did not stop when its serve.json was removed")
	}
	// The whole directory removed after writes (a memtable to flush, into
	// nothing): the process ends all the same, without closing the store.
	for range 3 {
		if r := c.onDemandHook(bin, fixture(t, "pre_tool_use_bash"), nil); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
	}
	s, _ := readServeJSON(t, c.dir)
	if s.IdleExit == "" {
		t.Fatal("no server on demand")
	}
	t.Cleanup(func() { syscall.Kill(s.PID, syscall.SIGKILL) })
	if err := os.RemoveAll(c.dir); err != nil {
		t.Fatal(err)
	}
	if !stopped(s.PID, 10*time.Second) {
		t.Fatal("the server did not stop when its directory was removed")
	}
	if r := c.run("serve", "--idle-exit", "-1s"); r.code != 2 {
		t.Fatalf("a negative --idle-exit: exit %d: %s", r.code, r.err)
	}
}

// TestServerOnDemandLogsLittle: a server on demand writes warnings and
// errors alone to DIR/serve.log, not a line a request, so that a hook used
// all day does not grow it without bound.
func TestServerOnDemandLogsLittle(t *testing.T) {
	c, bin := onDemandEnv(t)
	for range 5 {
		if r := c.onDemandHook(bin, fixture(t, "pre_tool_use_read"), nil); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
	}
	s, _ := readServeJSON(t, c.dir)
	t.Cleanup(func() { server.StopOnDemand(context.Background(), c.dir, nil) })
	if s.IdleExit == "" {
		t.Fatal("no server on demand")
	}
	b, err := os.ReadFile(filepath.Join(c.dir, serveLog))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"msg":"request"`)) {
		t.Fatalf("the server on demand logs every request:\n%s", b)
	}
}

// TestHookWhenItsServerCannotStart: a server that cannot start (here a
// binary that exits at once) leaves the event to open the store itself:
// the same answer, never a less strict one, and no server behind.
func TestHookWhenItsServerCannotStart(t *testing.T) {
	c := newEnv(t)
	c.hookSetup()
	for _, name := range []string{"user_prompt_submit", "pre_tool_use_read", "post_tool_use_read"} {
		if r := c.onDemandHook("/bin/false", fixture(t, name), nil); r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.err)
		}
	}
	r := c.onDemandHook("/bin/false", fixture(t, "pre_tool_use_bash"), nil)
	if d, reason := permission(t, r); d != "ask" {
		t.Fatalf("the Bash call after the poisoned Read, with no server: %q (%s)", d, reason)
	}
	if !strings.Contains(r.err, "did not start") {
		t.Fatalf("the event did not say its server did not start: %q", r.err)
	}
	if _, ok := readServeJSON(t, c.dir); ok {
		t.Fatal("serve.json is there")
	}
}

// TestHookServerOnDemandStartedByParallelEvents: Claude Code runs hooks in
// parallel; four first events at once start one server between them (the
// others' servers find the directory held and stop), and every event is
// answered.
func TestHookServerOnDemandStartedByParallelEvents(t *testing.T) {
	c, bin := onDemandEnv(t)
	results := make(chan result, 4)
	for i := range 4 {
		go func() {
			results <- c.onDemandHook(bin, withSession(t, fixture(t, "pre_tool_use_read"), "parallel-"+strconv.Itoa(i)), nil)
		}()
	}
	for range 4 {
		if r := <-results; r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
	}
	s, ok := readServeJSON(t, c.dir)
	if !ok || s.IdleExit == "" {
		t.Fatalf("no server on demand: %+v", s)
	}
	// The servers that found the directory held stop at once.
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if pids = serversOf(c.dir); len(pids) == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d servers run on the directory: %v", len(pids), pids)
		}
	}
	if pids[0] != s.PID {
		t.Fatalf("the server that runs is %d, serve.json names %d", pids[0], s.PID)
	}
}

// TestHookEventOutlivesItsServer: a gateway or a verb may stop a server on
// demand while an event goes through it (Claude Code starts its MCP
// servers, the gateway among them, as the session's first events come).
// The event is answered all the same, never blocked: it goes again through
// whoever holds the directory then. Timing decides where each stop lands;
// every event must be answered, wherever.
func TestHookEventOutlivesItsServer(t *testing.T) {
	c, bin := onDemandEnv(t)
	for i := range 12 {
		if r := c.onDemandHook(bin, fixture(t, "user_prompt_submit"), nil); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		done := make(chan result, 1)
		go func() { done <- c.onDemandHook(bin, fixture(t, "pre_tool_use_bash"), nil) }()
		time.Sleep(time.Duration(i) * 3 * time.Millisecond)
		if err := server.StopOnDemand(t.Context(), c.dir, c.clock); err != nil && !errors.Is(err, server.ErrNoServer) {
			t.Fatal(err)
		}
		r := <-done
		if r.code != 0 {
			t.Fatalf("stopped after %d ms: the event failed: exit %d: %s", i*3, r.code, r.err)
		}
	}
}

// serversOf lists the processes that run 'serve' on dir, read from /proc
// (a zombie, exited and not yet reaped, is not one).
func serversOf(dir string) []int {
	want := "\x00--dir\x00" + dir + "\x00serve\x00"
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains("\x00"+string(b), want) || stopped(pid, 0) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestServerOnDemandHoldsNoInheritedPipe: the hook runs with whatever
// descriptors its parent left open (a shell's pipe, the agent's); the server
// it starts outlives it, and must not keep them open, or whoever waits for
// that pipe's end waits for the server's idle exit (the README's pasted
// Quick start hung so, on the exit-code pipe its shell holds as fd 3).
func TestServerOnDemandHoldsNoInheritedPipe(t *testing.T) {
	bin := pedigreeBinary(t)
	c := newEnv(t)
	c.hookSetup()
	t.Cleanup(func() { server.StopOnDemand(context.Background(), c.dir, nil) })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--dir", c.dir, "hook", "claude")
	cmd.Env = append(os.Environ(), "PEDIGREE_KEYS="+filepath.Join(c.tmp, "keys"))
	cmd.Stdin = bytes.NewReader(fixture(t, "user_prompt_submit"))
	cmd.ExtraFiles = []*os.File{w}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	w.Close()
	if s, _ := readServeJSON(t, c.dir); s.IdleExit == "" || stopped(s.PID, 0) {
		t.Fatalf("no server on demand runs: %+v", s)
	}
	eof := make(chan error, 1)
	go func() { _, err := io.ReadAll(r); eof <- err }()
	select {
	case <-eof:
	case <-time.After(5 * time.Second):
		t.Fatal("the pipe the hook inherited is held open by the server it started")
	}
}

// TestVerbBesideHookEvents: a verb that needs the store (registry seal)
// while hook events keep coming, each of which starts a server on demand
// when none runs: the verb holds new servers off while it takes the store,
// stops whichever it finds at each attempt, and gets the store within its
// wait; every event is answered.
func TestVerbBesideHookEvents(t *testing.T) {
	c, bin := onDemandEnv(t)
	stop := make(chan struct{})
	failed := make(chan result, 1)
	go func() {
		defer close(failed)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r := c.onDemandHook(bin, fixture(t, "pre_tool_use_read"), nil); r.code != 0 {
				failed <- r
				return
			}
			// Events come apart: an agent waits for its model between
			// tool calls (here far less than it does).
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		if r := c.run("registry", "seal"); r.code != 0 {
			close(stop)
			t.Fatalf("registry seal beside hook events: exit %d: %s", r.code, r.err)
		}
	}
	close(stop)
	if r, ok := <-failed; ok {
		t.Fatalf("a hook event beside the verb failed: exit %d: %s", r.code, r.err)
	}
}

var otherRelease builtCommand

// otherReleaseBinary is the command built to list no route when it proves
// itself to a client, as every build before the route list does: the
// previous release's server, as far as a client can tell.
func otherReleaseBinary(t *testing.T) string {
	return otherRelease.build(t, "-ldflags", "-X github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server.withheldRoutes=*")
}

// TestHookReplacesAnotherReleasesServer: after an upgrade, the server that
// the previous binary started on demand (a build that lists no route, as
// every build before the route list does) is stopped by the next hook event,
// which starts this release's and answers through it, instead of failing
// every event while the session keeps the old one busy. A server of another release that a person started is left
// running, and the event, a verb and 'serve' each fail saying to restart it.
func TestHookReplacesAnotherReleasesServer(t *testing.T) {
	c, bin := onDemandEnv(t)
	old := otherReleaseBinary(t)
	startOld := func(args ...string) int {
		cmd := exec.Command(old, append([]string{"--dir", c.dir, "serve"}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		pid := cmd.Process.Pid
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGTERM); stopped(pid, 10*time.Second) })
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, err := server.Dial(t.Context(), c.dir, c.clock)
			if errors.Is(err, server.ErrOtherRelease) {
				return pid
			}
			if err == nil || time.Now().After(deadline) {
				t.Fatalf("the other release's server: %v", err)
			}
		}
	}

	oldPID := startOld("--idle-exit", "30m")
	for _, name := range []string{"user_prompt_submit", "pre_tool_use_read", "post_tool_use_read"} {
		if r := c.onDemandHook(bin, fixture(t, name), nil); r.code != 0 {
			t.Fatalf("%s beside another release's server on demand: exit %d: %s", name, r.code, r.err)
		}
	}
	if d, reason := permission(t, c.onDemandHook(bin, fixture(t, "pre_tool_use_bash"), nil)); d != "ask" {
		t.Fatalf("the Bash call after the poisoned Read, through the new server: %q (%s)", d, reason)
	}
	if !stopped(oldPID, 10*time.Second) {
		t.Fatal("the other release's server on demand runs on")
	}
	s, ok := readServeJSON(t, c.dir)
	if !ok || s.PID == oldPID || s.IdleExit == "" {
		t.Fatalf("no server of this release on demand: %+v %v", s, ok)
	}
	if c, err := server.Dial(t.Context(), c.dir, c.clock); err != nil {
		t.Fatalf("the server started in its place: %v", err)
	} else {
		c.Close()
	}
	// A parallel event that saw the old server, and comes to stop it after
	// this one started its own, leaves this release's running.
	if err := server.StopOtherRelease(t.Context(), c.dir, c.clock); err != nil || stopped(s.PID, 200*time.Millisecond) {
		t.Fatalf("a server of this release on demand, stopped as another release's: %v", err)
	}
	if err := server.StopOnDemand(t.Context(), c.dir, c.clock); err != nil {
		t.Fatal(err)
	}

	person := startOld()
	r := c.onDemandHook(bin, fixture(t, "pre_tool_use_read"), nil)
	if r.code != 2 || !strings.Contains(r.err, "another pedigree release") || !strings.Contains(r.err, "start it again") {
		t.Fatalf("the event beside a person's server of another release: exit %d: %s", r.code, r.err)
	}
	for _, args := range [][]string{{"log", "refusals"}, {"serve"}, {"mcp", "run", "--", "true"}} {
		if r := c.run(args...); r.code == 0 || !strings.Contains(r.err, "another pedigree release") {
			t.Fatalf("%v beside a person's server of another release: exit %d: %s", args, r.code, r.err)
		}
	}
	if stopped(person, 200*time.Millisecond) {
		t.Fatal("a server a person started was stopped")
	}
}
