package pedigree_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
	"github.com/pedigree-ai/pedigree/tlog"
)

// snapshot counts what a refused call must not change.
func snapshot(t *testing.T, e *pedigree.Engine) [3]uint64 {
	t.Helper()
	n, err := hatch.Graph(e).Count(0)
	if err != nil {
		t.Fatal(err)
	}
	size, err := hatch.Log(e).Size()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := e.Decisions(t.Context(), pedigree.DecisionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return [3]uint64{uint64(n), size, uint64(len(ds))}
}

// TestLibraryBadInput feeds the library each bad input and checks the exact
// error and that nothing was stored.
func TestLibraryBadInput(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	ctx := t.Context()
	e := w.E
	prompt := w.Record("user:alice", "s", "p", nil)
	denied := w.Check("agent:planner", pedigree.Call{Session: "s", Tool: "pay", Justification: []string{w.Record("tool:gmail_read", "s", "m", nil).ID}})

	sign := func(as string, key string, st *lineage.Statement) []byte {
		env, _, err := lineage.Sign(w.Keys[key], st)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	entry := func(as string, parents ...lineage.Parent) *lineage.Statement {
		if parents == nil {
			parents = []lineage.Parent{}
		}
		return &lineage.Statement{Version: 1, Principal: as, Kind: lineage.KindMemory, ContentDigest: lineage.DigestContent([]byte("c")), Parents: parents, Time: lineage.FormatTime(time.Now())}
	}
	good := sign("user:alice", "user:alice", entry("user:alice"))
	var envMap map[string]any
	json.Unmarshal(good, &envMap)
	reencode := func(mut func(map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range envMap {
			m[k] = v
		}
		mut(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name string
		fn   func() error
		want error
	}{
		{"garbage envelope", func() error { _, err := e.Insert(ctx, []byte("{not json"), nil); return err }, lineage.ErrMalformed},
		{"empty envelope", func() error { _, err := e.Insert(ctx, nil, nil); return err }, lineage.ErrMalformed},
		{"wrong payload type", func() error {
			_, err := e.Insert(ctx, reencode(func(m map[string]any) { m["payloadType"] = "application/json" }), nil)
			return err
		}, lineage.ErrMalformed},
		{"two signatures", func() error {
			_, err := e.Insert(ctx, reencode(func(m map[string]any) {
				s := m["signatures"].([]any)
				m["signatures"] = append(s, s[0])
			}), nil)
			return err
		}, lineage.ErrMalformed},
		{"smuggled field", func() error {
			_, err := e.Insert(ctx, reencode(func(m map[string]any) { m["tier"] = "internal" }), nil)
			return err
		}, lineage.ErrMalformed},
		{"oversized envelope", func() error {
			_, err := e.Insert(ctx, []byte(`{"payload":"`+strings.Repeat("A", lineage.MaxEnvelopeBytes)+`"}`), nil)
			return err
		}, lineage.ErrMalformed},
		{"unknown principal", func() error {
			_, err := e.Insert(ctx, sign("user:nobody", "user:alice", entry("user:nobody")), nil)
			return err
		}, registry.ErrUnknownPrincipal},
		{"spoofed principal", func() error {
			_, err := e.Insert(ctx, sign("agent:planner", "tool:gmail_read", entry("agent:planner")), nil)
			return err
		}, registry.ErrBadSignature},
		{"record with another principal's key", func() error {
			_, err := e.Record(ctx, w.Keys["tool:gmail_read"], pedigree.Entry{Principal: "agent:planner", Content: []byte("x"), Parents: []lineage.Parent{}})
			return err
		}, registry.ErrBadSignature},
		{"record as an unknown principal", func() error {
			_, err := e.Record(ctx, w.Keys["user:alice"], pedigree.Entry{Principal: "user:nobody", Content: []byte("x"), Parents: []lineage.Parent{}})
			return err
		}, registry.ErrUnknownPrincipal},
		{"unknown parent", func() error {
			_, err := e.Insert(ctx, sign("user:alice", "user:alice", entry("user:alice", lineage.Parent{ID: strings.Repeat("cd", 32), Weight: 1})), nil)
			return err
		}, lineage.ErrUnknownParent},
		{"content not matching its digest", func() error { _, err := e.Insert(ctx, good, []byte("d")); return err }, lineage.ErrMalformed},
		{"oversized content", func() error {
			_, err := e.Record(ctx, w.Keys["user:alice"], pedigree.Entry{Principal: "user:alice", Content: make([]byte, lineage.MaxContentBytes+1), StoreContent: true, Parents: []lineage.Parent{}})
			return err
		}, lineage.ErrMalformed},
		{"approval kind without a grant", func() error {
			st := entry("user:alice")
			st.Kind = lineage.KindApproval
			_, _, err := lineage.Sign(w.Keys["user:alice"], st)
			return err
		}, lineage.ErrMalformed},
		{"gate check of a non-call", func() error { _, err := e.Envelopes().Check(ctx, good, nil); return err }, lineage.ErrMalformed},
		{"insert of a Signed not made by SignStatement", func() error {
			_, err := e.Envelopes().InsertSigned(ctx, &lineage.Signed{}, nil)
			return err
		}, lineage.ErrMalformed},
		{"gate check of garbage", func() error { _, err := e.Envelopes().Check(ctx, []byte("x"), nil); return err }, lineage.ErrMalformed},
		{"gate approve of a non-approval", func() error { _, err := e.Envelopes().Approve(ctx, good); return err }, gate.ErrApproval},
		{"approval by an agent", func() error {
			_, err := e.Approve(ctx, w.Keys["agent:planner"], "agent:planner", denied.ID, time.Minute)
			return err
		}, gate.ErrApproval},
		{"approval of an unknown decision", func() error {
			_, err := e.Approve(ctx, w.Keys["user:alice"], "user:alice", strings.Repeat("0", 64), time.Minute)
			return err
		}, gate.ErrUnknownDecision},
		{"approval with a negative lifetime", func() error {
			_, err := e.Approve(ctx, w.Keys["user:alice"], "user:alice", denied.ID, -time.Hour)
			return err
		}, gate.ErrApproval},
		{"call arguments not an object", func() error {
			_, err := e.Check(ctx, w.Keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "pay", Args: []byte(`[1]`)})
			return err
		}, lineage.ErrMalformed},
		{"call with a bad tool name", func() error {
			_, err := e.Check(ctx, w.Keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "pay money"})
			return err
		}, lineage.ErrMalformed},
		{"argument source unknown", func() error {
			_, err := e.Check(ctx, w.Keys["agent:planner"], pedigree.Call{Principal: "agent:planner", Session: "s", Tool: "pay", Args: []byte(`{"a":1}`), ArgSources: map[string][]string{"a": {"deadbeefdeadbeef"}}})
			return err
		}, lineage.ErrUnknownEntry},
		{"preview for an unregistered principal", func() error {
			_, err := e.Preview(ctx, pedigree.Call{Principal: "agent:ghost", Session: "s", Tool: "pay"})
			return err
		}, registry.ErrUnknownPrincipal},
		{"recall of an unknown entry", func() error { return e.Recall(ctx, "s", []string{strings.Repeat("9", 64)}) }, lineage.ErrUnknownEntry},
		{"recall into a malformed session", func() error { return e.Recall(ctx, "bad session", []string{prompt.ID}) }, lineage.ErrMalformed},
		{"resolve a short prefix", func() error { _, err := e.Resolve(ctx, "abc"); return err }, lineage.ErrMalformed},
		{"resolve an upper-case ID", func() error { _, err := e.Resolve(ctx, strings.ToUpper(prompt.ID)); return err }, lineage.ErrMalformed},
		{"trace an unknown entry", func() error { _, err := e.Trace(ctx, strings.Repeat("7", 64), lineage.TraceOptions{}); return err }, lineage.ErrUnknownEntry},
		{"add a principal after freeze", func() error {
			return e.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: "user:eve", Tier: registry.User, PublicKey: w.Keys["user:alice"].Public()})
		}, registry.ErrFrozen},
		{"add a malformed principal", func() error {
			return e.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: "eve", Tier: registry.User, PublicKey: w.Keys["user:alice"].Public()})
		}, registry.ErrBadID},
		{"freeze again", func() error { return e.Bootstrap().Freeze(ctx, w.Operator) }, registry.ErrFrozen},
		{"checkpoint with another key", func() error { _, err := e.Log().Checkpoint(ctx, w.Keys["user:alice"]); return err }, registry.ErrBadKey},
		{"prove before any checkpoint", func() error { _, err := hatch.Log(e).Prove(prompt.ID, 0); return err }, tlog.ErrNoCheckpoint},
		{"consistency backwards", func() error { _, err := hatch.Log(e).Consistency(5, 2); return err }, tlog.ErrMalformed},
		{"init on an existing store", func() error {
			_, err := pedigree.Init(ctx, w.Dir, 0.5, pedigree.WithOperatorSigner(w.Operator))
			return err
		}, store.ErrExists},
		{"open a directory with no store", func() error { _, err := pedigree.Open(ctx, t.TempDir()); return err }, store.ErrNotInitialized},
		{"init with tau 0", func() error {
			_, err := pedigree.Init(ctx, t.TempDir(), 0, pedigree.WithOperatorSigner(w.Operator))
			return err
		}, registry.ErrBadTau},
		{"init without an operator key", func() error { _, err := pedigree.Init(ctx, t.TempDir(), 0.5); return err }, pedigree.ErrNoOperatorKey},
		{"init with a negative approval cap", func() error {
			_, err := pedigree.Init(ctx, t.TempDir(), 0.5, pedigree.WithOperatorSigner(w.Operator), pedigree.WithMaxApprovalTTL(-time.Hour))
			return err
		}, registry.ErrBadTTL},
		{"open with a missing policy directory", func() error {
			_, err := pedigree.NewInMemory(ctx, 0.5, w.Operator, pedigree.WithPolicyDir(filepath.Join(t.TempDir(), "none")))
			return err
		}, gate.ErrPolicy},
		{"a malformed catalog", func() error { _, err := gate.ParseCatalog([]byte("tools: {pay: {sensitiv: true}}")); return err }, gate.ErrCatalog},
		{"a catalog with an unknown role", func() error { _, err := gate.ParseCatalog([]byte("tools: {pay: {role: steal}}")); return err }, gate.ErrCatalog},
	}
	before := snapshot(t, e)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.fn()
			if err == nil || !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if after := snapshot(t, e); after != before {
		t.Fatalf("refused calls changed the store: %v -> %v (entries, log leaves, decisions)", before, after)
	}
	if len(cases) < 35 {
		t.Fatalf("%d cases", len(cases))
	}
}
