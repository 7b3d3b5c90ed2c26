package cli

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// witness serve keeps the directory's log; a store given its URL and key
// hands it every checkpoint (verify asks it), and cannot write once it is
// gone, nor with a witness key it cannot read.
func TestWitnessServe(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errw strings.Builder
	a := &app{in: strings.NewReader(""), out: pw, errw: &errw, getenv: c.getenv, clock: c.clock}
	done := make(chan int, 1)
	key, state := filepath.Join(c.tmp, "w.key"), filepath.Join(c.tmp, "w.json")
	go func() {
		done <- a.run(ctx, []string{"--dir", c.dir, "witness", "serve", "--key", key, "--state", state})
		pw.Close()
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("witness serve printed no URL: %v %s", err, errw.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	c.env = map[string]string{"PEDIGREE_WITNESS_URL": strings.TrimSpace(url), "PEDIGREE_WITNESS_KEY": filepath.Join(c.tmp, "w.pub")}
	c.rec("user:alice", "--session", "w1", "--kind", "prompt", "--content", "pay the gas bill")
	c.must("verify")
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the witness's state: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(state); !strings.Contains(string(b), `"logs"`) || strings.Contains(string(b), `"logs":{}`) {
		t.Fatalf("the witness holds no checkpoint: %s", b)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("witness serve exited %d: %s", code, errw.String())
	}
	// Gone: the store cannot hold itself to it, and writes nothing.
	if r := c.run("record", "--as", "user:alice", "--key", c.key("user_alice"), "--session", "w1", "--content", "more"); r.code == 0 || !strings.Contains(r.err, "witness") {
		t.Fatalf("a write with the witness gone: exit %d %s", r.code, r.err)
	}
	c.env["PEDIGREE_WITNESS_KEY"] = filepath.Join(c.tmp, "missing.pub")
	if r := c.run("verify"); r.code == 0 || !strings.Contains(r.err, "WithWitnessHTTP") {
		t.Fatalf("a witness key that cannot be read: exit %d %s", r.code, r.err)
	}
}
