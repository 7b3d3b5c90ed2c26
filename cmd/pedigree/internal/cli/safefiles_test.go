package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/hook"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/testkit/tampertest"
	"strings"
)

// outsideTree is every file under dir with its mode and content: what a
// planted link must not change.
func outsideTree(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	var b bytes.Buffer
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		names = append(names, p)
		return nil
	})
	sort.Strings(names)
	for _, p := range names {
		fi, _ := os.Lstat(p)
		c, _ := os.ReadFile(p)
		b.WriteString(p + " " + fi.Mode().String() + " " + string(c) + "\n")
	}
	return b.String()
}

// TestPlantedLinksTouchNothingOutside: a writer of the data directory
// plants a symbolic link, or a hard link, in place of every name pedigree
// writes there (the freeze copy, the seal and the temporaries they were
// written through, serve.json, the token, the socket, the hook's state, the
// gateway's configuration, the log of a server started in the
// background): no verb writes, truncates or removes anything
// outside the directory through it, and a regular file where the socket is
// expected stays.
func TestPlantedLinksTouchNothingOutside(t *testing.T) {
	for _, kind := range []string{"symlink", "hardlink"} {
		t.Run(kind, func(t *testing.T) {
			c := newEnv(t)
			out := filepath.Join(c.tmp, "outside")
			os.MkdirAll(filepath.Join(out, "dir"), 0o755)
			plant := func(name string) {
				t.Helper()
				victim := filepath.Join(out, filepath.Base(name)+".victim")
				os.WriteFile(victim, []byte("not pedigree's"), 0o644)
				p := filepath.Join(c.dir, name)
				os.MkdirAll(filepath.Dir(p), 0o700)
				os.Remove(p)
				var err error
				if kind == "symlink" {
					err = os.Symlink(victim, p)
				} else {
					err = os.Link(victim, p)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var before string
			check := func(step string) {
				t.Helper()
				if after := outsideTree(t, out); after != before {
					t.Fatalf("%s: a file outside the data directory changed:\nbefore\n%s\nafter\n%s", step, before, after)
				}
			}
			c.must("init")
			c.must("registry", "add", "user:alice", "--tier", "user", "--approver", "--new-key", c.key("user_alice"))
			// The temporaries the freeze copy and the seal were written
			// through, and the gateway's configuration.
			for _, n := range []string{pedigree.FreezeFile + ".tmp", pedigree.SealFile + ".tmp", pedigree.MCPConfigFile + ".tmp"} {
				plant(n)
			}
			before = outsideTree(t, out)
			c.run("registry", "freeze")
			check("registry freeze")
			c.run("registry", "seal")
			check("registry seal")
			plant(pedigree.MCPConfigFile)
			before = outsideTree(t, out)
			(&gateway.Config{}).Save(c.dir)
			check("the gateway's configuration")
			for _, n := range []string{pedigree.FreezeFile, pedigree.SealFile} {
				plant(n)
			}
			before = outsideTree(t, out)
			c.run("registry", "seal")
			check("registry seal over a link")
			// A data directory whose files are links does not open.
			if r := c.run("registry", "list"); r.code == ExitOK {
				t.Fatalf("a data directory whose files are links opened")
			}
			for _, n := range []string{pedigree.FreezeFile, pedigree.SealFile, pedigree.MCPConfigFile} {
				os.Remove(filepath.Join(c.dir, n))
			}
			c.must("registry", "seal")
			// serve.json and the token, planted after the store opened.
			e, err := pedigree.Open(t.Context(), c.dir)
			if err != nil {
				t.Fatal(err)
			}
			plant(server.InfoFile)
			plant(server.TokenFile)
			before = outsideTree(t, out)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			server.Run(ctx, e, server.Options{})
			check("serve")
			// The socket's name is a link.
			plant(server.SocketFile)
			before = outsideTree(t, out)
			server.Run(ctx, e, server.Options{})
			check("serve on a planted socket name")
			e.Close()
			// The log a server started in the background (the hook's on
			// demand, the page's) appends to.
			plant(serveLog)
			before = outsideTree(t, out)
			a := &app{dir: c.dir, errw: &bytes.Buffer{}, getenv: c.getenv, clock: c.clock, executable: "/bin/true"}
			if _, err := a.startServer(t.Context(), nil, time.Second, 10*time.Millisecond); err == nil {
				t.Error("a server was started with its log a link")
			}
			check("a server's log")
			// The hook's state: its directory is a link.
			if kind == "symlink" {
				os.Symlink(filepath.Join(out, "dir"), filepath.Join(c.dir, hook.StateDir))
				before = outsideTree(t, out)
				st := hook.NewState(filepath.Join(c.dir, hook.StateDir))
				if err := st.Put(&hook.Use{Session: "s", ToolUseID: "t1", Tool: "Bash"}); err == nil {
					t.Error("the hook's state was written through a link")
				}
				st.MarkUnrecorded("s", "x")
				check("the hook's state")
			}
		})
	}
}

// TestStaleSocketOnlyIfASocket: serve removes a socket a dead server left,
// never a regular file (or a link) where the socket is expected.
func TestStaleSocketOnlyIfASocket(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	sock := filepath.Join(c.tmp, "here.sock")
	os.WriteFile(sock, []byte("someone's file"), 0o600)
	e, err := pedigree.Open(t.Context(), c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := server.Run(ctx, e, server.Options{Socket: sock, Ready: func(string, string) { cancel() }}); err == nil {
		t.Fatal("served on a regular file's name")
	}
	if b, err := os.ReadFile(sock); err != nil || string(b) != "someone's file" {
		t.Fatalf("the regular file where the socket was expected was removed: %q %v", b, err)
	}
}

// TestDataDirectoryWithLinksRefused: a data directory one of whose files is
// a symbolic or a hard link is refused at open, naming it.
func TestDataDirectoryWithLinksRefused(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"symlink", pedigree.ToolsFile}, {"hardlink", pedigree.FreezeFile}, {"symlink", "db/MANIFEST"},
	} {
		t.Run(tc.name+" "+tc.file, func(t *testing.T) {
			c := newEnv(t)
			c.bootstrap()
			p := filepath.Join(c.dir, tc.file)
			elsewhere := filepath.Join(c.tmp, "elsewhere")
			if b, err := os.ReadFile(p); err == nil {
				os.WriteFile(elsewhere, b, 0o644)
			} else {
				os.WriteFile(elsewhere, []byte("tools: {}\n"), 0o644)
			}
			os.Remove(p)
			if tc.name == "symlink" {
				os.Symlink(elsewhere, p)
			} else {
				os.Link(elsewhere, p)
			}
			r := c.run("registry", "list")
			if r.code == ExitOK || !bytes.Contains([]byte(r.err), []byte("link")) {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
		})
	}
}

// TestVerifyReportsTheWitness: every verb that writes hands a signed
// checkpoint to the witness file in the keys directory; verify reports
// how much of the log it vouches for, and names a tail cut behind it.
func TestVerifyReportsTheWitness(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	c.taint()
	m := c.must("-o", "json", "verify").json(t)
	if m["log_size"] != 3.0 || m["witnessed"] != 3.0 || m["unwitnessed"] != 0.0 {
		t.Fatalf("verify: %v", m)
	}
	ws, _ := filepath.Glob(filepath.Join(c.tmp, "keys", "witness-*.json"))
	if len(ws) != 1 {
		t.Fatalf("no witness file in the keys directory: %v", ws)
	}
	// The last entry cut from the log, everything else rebuilt to match.
	last := c.rec("user:alice", "--session", "s1", "--kind", "prompt", "--content", "one more")
	if _, err := tampertest.Rebuild(t.Context(), c.dir, tampertest.Edit{Drop: map[string]bool{last: true}}); err != nil {
		t.Fatal(err)
	}
	r := c.run("verify", "--witness", ws[0])
	if r.code != ExitNegative || !strings.Contains(r.out, "behind the checkpoint kept elsewhere") {
		t.Fatalf("verify after the tail was cut: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := c.run("record", "--as", "user:alice", "--key", c.key("user_alice"), "--session", "s1", "--content", "after"); r.code == ExitOK {
		t.Fatal("a store behind its witness took a write")
	}
}
