package gateway

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/lineage"
)

// everything is the reference server-everything as the upstream ev, with
// what the gateway sends it copied to wire (the test reads the upstream's
// side of the conversation there).
func everything(t *testing.T, wire string) Upstream {
	t.Helper()
	js := filepath.Join(nodeModules(t), "server-everything", "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		t.Skipf("server-everything is not installed (cd testdata/mcp && npm ci): %v", err)
	}
	return Upstream{Name: "ev", Principal: "tool:ev", Command: "sh",
		Args: []string{"-c", `tee -a "$0" | node "$1" stdio`, wire, js}}
}

const catalogEverything = catalogDeny + `  ev.trigger-long-running-operation: {sensitive: false}
  ev.toggle-subscriber-updates: {sensitive: false}
  ev.echo: {sensitive: false}
`

// within waits for cond, polling, for at most a generous bound: the event
// is asynchronous, and its absence after the bound is the failure.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

// Progress, cancellation, resource subscriptions and completions pass
// through the gateway between a go-sdk client and the reference
// server-everything, in memory (as over stdio) and over streamable HTTP.
func TestPassThrough(t *testing.T) {
	t.Run("in-memory", func(t *testing.T) { passThrough(t, (*world).transport) })
	t.Run("streamable-http", func(t *testing.T) {
		passThrough(t, func(w *world, t testing.TB) mcp.Transport {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go w.g.ServeHTTP(ctx, l, "s3cret")
			return &mcp.StreamableClientTransport{Endpoint: "http://" + l.Addr().String() + "/", HTTPClient: &http.Client{Transport: bearer{"s3cret"}}}
		})
	})
}

func passThrough(t *testing.T, transport func(*world, testing.TB) mcp.Transport) {
	wire := filepath.Join(t.TempDir(), "upstream-wire.jsonl")
	w := newWorld(t, catalogEverything, everything(t, wire))
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	updated := make(chan string, 100)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
		ResourceUpdatedHandler:      func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	}).Connect(context.Background(), transport(w, t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()

	t.Run("progress", func(t *testing.T) {
		// Three steps a tenth of a second apart: the first two are well
		// before the result. (The last comes right before it, and may reach
		// the gateway after it: then it is dropped.)
		p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}}
		p.SetProgressToken("host-token-1")
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError || !strings.Contains(text(res), "Long running operation completed") {
			t.Fatalf("call: %v %+v", err, res)
		}
		for want := 1.0; want <= 2; want++ {
			select {
			case n := <-progress:
				if n.ProgressToken != "host-token-1" || n.Progress != want || n.Total != 3 {
					t.Fatalf("progress %v: %+v", want, n)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("progress %v never came back through the gateway", want)
			}
		}
	})

	t.Run("cancellation", func(t *testing.T) {

		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 20, "steps": 20}}
		p.SetProgressToken("host-token-2")
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, p)
			errc <- err
		}()
		for running := false; !running; {
			select {
			case n := <-progress: // forwarded and running at the upstream
				running = n.ProgressToken == "host-token-2"
			case <-time.After(30 * time.Second):
				t.Fatal("the long call never reported progress")
			}
		}
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("a cancelled call returned a result")
		}
		within(t, "notifications/cancelled reached the upstream", func() bool {
			b, _ := os.ReadFile(wire)
			return strings.Contains(string(b), `"method":"notifications/cancelled"`)
		})
		// The record: both calls were allowed and forwarded; only the one
		// that returned has a tool output.
		w.settle()
		ds, err := w.E.Decisions(ctx, pedigree.DecisionQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var session string
		calls := 0
		for _, d := range ds {
			if d.Tool == "ev.trigger-long-running-operation" {
				calls++
				session = d.Session
				if d.Decision != gate.Allow {
					t.Fatalf("decision %+v", d)
				}
			}
		}
		ids, err := w.E.Context(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := hatch.Graph(w.E).Nodes(ids)
		if err != nil {
			t.Fatal(err)
		}
		outputs := 0
		for _, n := range nodes {
			if n.Kind == lineage.KindToolOutput && n.Principal == "tool:ev" {
				outputs++
			}
		}
		if calls != 2 || outputs != 1 {
			t.Fatalf("%d decisions and %d outputs of the long call, want 2 and 1 (the cancelled call has none)", calls, outputs)
		}
		// The session goes on.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "still here"}})
		if err != nil || res.IsError || !strings.Contains(text(res), "still here") {
			t.Fatalf("a call after the cancellation: %v %+v", err, res)
		}
	})

	t.Run("subscriptions", func(t *testing.T) {
		init := cs.InitializeResult()
		if init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
			t.Fatalf("the gateway does not offer subscriptions: %+v", init.Capabilities.Resources)
		}
		var uri string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(r.URI, "demo://resource/static/document/") {
				uri = r.URI
				break
			}
		}
		if uri == "" {
			t.Fatal("no static document resource is offered")
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		// (At 2026-07-28 a subscription is a listen stream whose refusal the
		// client does not wait for; resources/subscribe answers.)
		old := w.connect(t, "2025-11-25", "")
		if err := old.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "demo://nobody/offers/this"}); err == nil {
			t.Fatal("a subscription to a resource no upstream offers was accepted")
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("toggle-subscriber-updates: %v %+v", err, res)
		}
		select {
		case got := <-updated:
			if got != uri {
				t.Fatalf("notifications/resources/updated for %s, want %s", got, uri)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no notifications/resources/updated came through the gateway")
		}
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		within(t, "the gateway unsubscribed at the upstream", func() bool {
			b, _ := os.ReadFile(wire)
			return strings.Contains(string(b), `"method":"resources/unsubscribe"`)
		})
		cs.CallTool(ctx, &mcp.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}})
	})

	t.Run("completions", func(t *testing.T) {
		if cs.InitializeResult().Capabilities.Completions == nil {
			t.Fatal("the gateway does not offer completions")
		}
		ref := &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"}
		res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "department", Value: "Eng"}})
		if err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != "Engineering" {
			t.Fatalf("department completion: %v %+v", err, res)
		}
		res, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"},
			Context: &mcp.CompleteContext{Arguments: map[string]string{"department": "Engineering"}}})
		if err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != "Alice" {
			t.Fatalf("name completion with its context: %v %+v", err, res)
		}
		if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "no-such-prompt"},
			Argument: mcp.CompleteParamsArgument{Name: "x", Value: ""}}); err == nil {
			t.Fatal("a completion for a prompt nobody offers was answered")
		}
	})
}
