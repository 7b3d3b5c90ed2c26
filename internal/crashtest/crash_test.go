//go:build crash

// Package crashtest kills a writer process with SIGKILL at random moments
// and checks, after each kill, that every write the writer saw acknowledged
// is in the store, that verify is clean and that the registry is still
// frozen. It runs in CI through .ci/run (go test -tags crash).
package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

const kills = 20

var principals = []struct {
	id   string
	tier registry.Tier
}{{"user:alice", registry.User}, {"agent:planner", registry.Internal}, {"tool:mail", registry.External}}

func keyFile(dir, id string) string {
	return filepath.Join(dir, strings.ReplaceAll(id, ":", "_")+".key")
}

// TestMain turns the test binary into the writer when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PEDIGREE_CRASH_WRITER"); dir != "" {
		if err := writer(dir); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writer records and checks from four goroutines until it is killed,
// printing "entry ID" or "decision ID" after each acknowledged write.
func writer(dir string) error {
	ctx := context.Background() // a child process, killed: no test to end it
	e, err := pedigree.Open(ctx, dir)
	if err != nil {
		return err
	}
	keys := map[string]*registry.Signer{}
	for _, p := range principals {
		if keys[p.id], err = registry.LoadSigner(keyFile(dir, p.id)); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	ack := func(kind, id string) {
		mu.Lock()
		fmt.Fprintf(out, "%s %s\n", kind, id)
		out.Flush()
		mu.Unlock()
	}
	fmt.Println("ready")
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			var last []string
			session := fmt.Sprintf("w%d-%d", w, r.Uint32())
			for i := 0; ; i++ {
				p := principals[r.IntN(len(principals))]
				parents := []lineage.Parent{}
				if len(last) > 0 {
					parents = append(parents, lineage.Parent{ID: last[r.IntN(len(last))], Weight: 1})
				}
				n, err := e.Record(ctx, keys[p.id], pedigree.Entry{Principal: p.id, Session: session, Content: []byte(fmt.Sprint(w, i)), Parents: parents})
				if err != nil {
					errs <- err
					return
				}
				ack("entry", n.ID)
				last = append(last, n.ID)
				if i%3 == 2 {
					d, err := e.Check(ctx, keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: session, Tool: "send",
						Args: []byte(fmt.Sprintf(`{"i":%d}`, i)), Justification: []string{n.ID}})
					if err != nil {
						errs <- err
						return
					}
					ack("decision", d.ID)
					ack("entry", d.CallID)
				}
			}
		}()
	}
	return <-errs
}

func TestCrash(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	op, _, _ := registry.GenerateSigner(nil)
	e, err := pedigree.Init(ctx, dir, 0.5, pedigree.WithOperatorSigner(op))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range principals {
		s, priv, _ := registry.GenerateSigner(nil)
		if err := registry.WritePrivateKeyFile(keyFile(dir, p.id), priv); err != nil {
			t.Fatal(err)
		}
		if err := e.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: p.id, Tier: p.tier, PublicKey: s.Public()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		t.Fatal(err)
	}
	e.Close()

	acked := map[string]string{} // id -> kind
	r := rand.New(rand.NewPCG(1, 2))
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PEDIGREE_CRASH_WRITER="+dir)
		stdout, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		if l := <-lines; l != "ready" {
			cmd.Wait()
			t.Fatalf("kill %d: writer did not start: %q %s", k, l, stderr.String())
		}
		deadline := time.After(time.Duration(20+r.IntN(400)) * time.Millisecond)
		n := 0
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kill %d: writer exited by itself: %s", k, stderr.String())
				}
				kind, id, _ := strings.Cut(l, " ")
				acked[id] = kind
				n++
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				break read
			}
		}
		// Acknowledgements already written to the pipe before the kill
		// count too.
		for l := range lines {
			kind, id, _ := strings.Cut(l, " ")
			acked[id] = kind
			n++
		}
		cmd.Wait()

		e, err := pedigree.Open(ctx, dir)
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		if !hatch.Registry(e).Frozen() {
			t.Fatalf("kill %d: the registry is not frozen", k)
		}
		for id, kind := range acked {
			var err error
			if kind == "entry" {
				_, err = hatch.Graph(e).Node(id)
			} else {
				_, err = e.Decision(ctx, id)
			}
			if err != nil {
				t.Fatalf("kill %d: acknowledged %s %s is gone: %v", k, kind, id, err)
			}
		}
		rep, err := e.Verify(ctx)
		if err != nil || !rep.OK() {
			t.Fatalf("kill %d: verify: %+v %v", k, rep, err)
		}
		t.Logf("kill %d: %d acknowledged this run, %d in all, %d entries verified", k+1, n, len(acked), rep.Entries)
		e.Close()
	}
}
