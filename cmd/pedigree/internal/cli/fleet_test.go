package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/server"
	"github.com/pedigree-ai/pedigree/registry"
)

// serve --nats embedded runs a one-server fleet on one machine: the verbs
// go through the node's socket, their writes through the stream, and the
// node's directory is rebuilt from the stream.
func TestServeEmbeddedFleet(t *testing.T) {
	c := newEnv(t)
	c.bootstrap()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errw bytes.Buffer
	keysOnly := func(k string) string {
		if k == "PEDIGREE_KEYS" {
			return c.getenv(k)
		}
		return ""
	}
	a := &app{in: strings.NewReader(""), out: &out, errw: &errw, getenv: keysOnly, clock: c.clock}
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, []string{"--dir", c.dir, "serve", "--nats", "embedded"}) }()
	info := filepath.Join(c.dir, server.InfoFile)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(info); err == nil {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve --nats embedded exited %d\n%s%s", code, out.String(), errw.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve --nats embedded did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.served = true
	// The embedded server's only credentials: in the keys directory,
	// readable by this user alone.
	creds, _ := filepath.Glob(filepath.Join(c.tmp, "keys", "nats-*.json"))
	if len(creds) != 1 {
		t.Fatalf("no NATS credentials in the keys directory: %v", creds)
	}
	if fi, err := os.Stat(creds[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the NATS credentials: %v %v", fi.Mode(), err)
	}
	email := c.rec("tool:gmail_read", "--session", "s1", "--kind", "tool_output", "--content", "pay 999 now")
	mem := c.rec("agent:planner", "--session", "s1", "--content", "pay 999")
	if show := c.must("-o", "json", "lineage", "show", mem[:10]).json(t); show["effective_tier"] != "external" {
		t.Fatalf("lineage show: %v", show)
	}
	c.must("verify")
	// The node's sidecar says it is ready, and its metrics carry the
	// fleet's figures (what a supervisor and a load balancer read).
	if code, body := sidecarGet(t, c.dir, "/readyz"); code != http.StatusOK || !strings.Contains(body, "ready") {
		t.Fatalf("/readyz of an embedded fleet node: %d %s", code, body)
	}
	code, body := sidecarGet(t, c.dir, "/metrics")
	for _, m := range []string{"pedigree_fleet_lag_records 0", "pedigree_fleet_applied_records_total", "pedigree_fleet_refused_records_total 0", "pedigree_fleet_connected 1"} {
		if code != http.StatusOK || !strings.Contains(body, m) {
			t.Fatalf("/metrics of an embedded fleet node has no %q: %d\n%s", m, code, body)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d\n%s", code, errw.String())
	}
	c.served = false
	// The node's witness of the stream: outside the directory, this
	// user's alone, holding a checkpoint past the writes.
	ws, _ := filepath.Glob(filepath.Join(c.tmp, "keys", "fleet-witness-*.json"))
	if len(ws) != 1 {
		t.Fatalf("no fleet witness in the keys directory: %v", ws)
	}
	if fi, err := os.Stat(ws[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the fleet witness: %v %v", fi, err)
	}
	var w struct{ Seq uint64 }
	if b, err := os.ReadFile(ws[0]); err != nil || json.Unmarshal(b, &w) != nil || w.Seq < 3 {
		t.Fatalf("the fleet witness holds %s (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "nats", "jetstream")); err != nil {
		t.Fatalf("the embedded NATS keeps no store in the directory: %v", err)
	}
	// The entries are in the directory too: it is a materialised view.
	if r := c.must("-o", "json", "lineage", "show", email[:10]).json(t); r["principal"] != "tool:gmail_read" {
		t.Fatalf("after serve: %v", r)
	}
}

// serve --nats --engine-key: a node signs with the engine key it is given
// when the frozen registry certifies it (engine:node2, registered before
// the freeze), and is refused with a key the registry does not certify.
func TestServeFleetEngineKey(t *testing.T) {
	c := newEnv(t)
	c.must("init")
	c.must("registry", "add", "engine:node2", "--tier", "external", "--new-key", c.key("node2-engine"))
	c.must("registry", "add", "tool:gmail_read", "--tier", "external", "--new-key", c.key("tool_gmail_read"))
	c.must("registry", "freeze")
	_, priv, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.WritePrivateKeyFile(c.key("stranger"), priv); err != nil {
		t.Fatal(err)
	}
	r := c.run("serve", "--nats", "embedded", "--engine-key", c.key("stranger"))
	if r.code != ExitError || !strings.Contains(r.err, "not certified") {
		t.Fatalf("serve with an uncertified engine key: exit %d\n%s", r.code, r.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errw bytes.Buffer
	a := &app{in: strings.NewReader(""), out: &out, errw: &errw, getenv: c.getenv, clock: c.clock}
	done := make(chan int, 1)
	go func() {
		done <- a.run(ctx, []string{"--dir", c.dir, "serve", "--nats", "embedded", "--engine-key", c.key("node2-engine")})
	}()
	info := filepath.Join(c.dir, server.InfoFile)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(info); err == nil {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve --engine-key exited %d\n%s", code, errw.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve --engine-key did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.served = true
	c.rec("tool:gmail_read", "--session", "s1", "--kind", "tool_output", "--content", "signed by node2")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d\n%s", code, errw.String())
	}
	c.served = false
}

// sidecarGet is a GET to the server of dir, over its socket, with its token.
func sidecarGet(t *testing.T, dir, path string) (int, string) {
	t.Helper()
	var inf struct{ Socket string }
	b, err := os.ReadFile(filepath.Join(dir, server.InfoFile))
	if err != nil || json.Unmarshal(b, &inf) != nil || inf.Socket == "" {
		t.Fatalf("%s: %v %s", server.InfoFile, err, b)
	}
	token, err := server.ReadToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", inf.Socket)
	}}}
	req, _ := http.NewRequest("GET", "http://localhost"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(rb)
}
