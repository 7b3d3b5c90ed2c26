package pedigree_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// sealRefused fails unless reopening the world is refused for what the
// directory's configuration became, naming want.
func sealRefused(t *testing.T, w *enginetest.World, want string) {
	t.Helper()
	err := w.Reopen()
	var cse *pedigree.ConfigSealError
	if !errors.Is(err, pedigree.ErrConfigSeal) || !errors.Is(err, pedigree.ErrTampered) || !errors.As(err, &cse) ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("opened, or refused for another reason (want %q): %v", want, err)
	}
}

// A writer of the data directory, with no key, edits tools.yaml after
// freeze so that send_money is no longer gated, or adds a trajectory model:
// the store is refused at open, saying which file changed. The operator's
// seal (pedigree.Seal, with the operator key alone) makes a change count.
func TestConfigSeal(t *testing.T) {
	ctx := t.Context()
	w := enginetest.NewOnDisk(t, enginetest.Default)
	tools := filepath.Join(w.Dir, pedigree.ToolsFile)
	sealPath := filepath.Join(w.Dir, pedigree.SealFile)
	if _, err := os.Stat(sealPath); err != nil {
		t.Fatalf("freeze wrote no seal: %v", err)
	}
	w.E.Close()
	w.E = nil

	// The operator's catalog, written after freeze, counts once sealed.
	if err := os.WriteFile(tools, []byte("tools:\n  send_money: {role: send}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sealRefused(t, w, "tools.yaml was added since the seal")
	if err := pedigree.Seal(ctx, w.Dir, w.Keys["user:alice"]); !errors.Is(err, registry.ErrBadKey) {
		t.Fatalf("sealed with a key that is not the operator's: %v", err)
	}
	if err := pedigree.Seal(ctx, w.Dir, w.Operator); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if !hatch.Gate(w.E).Catalog().Tools["send_money"].IsSensitive() {
		t.Fatal("the sealed catalog was not the one loaded")
	}
	deniedSession(t, w) // send_money gated: a tainted send is denied

	// The attack: un-gate send_money. Refused at open...
	w.E.Close()
	w.E = nil
	sealed, _ := os.ReadFile(tools)
	if err := os.WriteFile(tools, []byte("tools:\n  send_money: {sensitive: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sealRefused(t, w, "tools.yaml was changed since the seal")
	// ...and, made while an engine runs, named by verify; the engine keeps
	// deciding on the catalog it read at open.
	os.WriteFile(tools, sealed, 0o644)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tools, []byte("tools:\n  send_money: {sensitive: false}\n"), 0o644)
	r, err := w.E.Verify(ctx)
	if err != nil || r.OK() || !strings.Contains(r.Problems[0].What, "tools.yaml was changed since the seal") {
		t.Fatalf("verify after the edit: %+v %v", r, err)
	}
	d := w.Check("agent:planner", pedigree.Call{Session: "s", Tool: "send_money", Args: []byte(`{"to":"999"}`)})
	if d.Decision != gate.Deny {
		t.Fatalf("the running engine took up the edited catalog: %s %v", d.Decision, d.Reasons)
	}
	w.E.Close()
	w.E = nil
	os.WriteFile(tools, sealed, 0o644)

	// A seal signed by another key than the operator's.
	env, _ := os.ReadFile(sealPath)
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := w.Keys["user:alice"].SignEnvelope(e.PayloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(sealPath)
	os.WriteFile(sealPath, forged, 0o444)
	sealRefused(t, w, "is not signed by the operator key")
	os.Remove(sealPath)
	os.WriteFile(sealPath, env, 0o444)

	// A model added, and the seal deleted with a file still there.
	model := filepath.Join(w.Dir, pedigree.ModelFile)
	os.WriteFile(model, []byte("{}"), 0o644)
	sealRefused(t, w, "trajectory-model.json was added since the seal")
	os.Remove(model)
	os.Remove(sealPath)
	sealRefused(t, w, "tools.yaml is not sealed")

	// The seal deleted with every file, so that the model's alerts go
	// with it: refused too.
	os.Remove(tools)
	sealRefused(t, w, pedigree.SealFile+" is missing")
	if err := pedigree.Seal(ctx, w.Dir, w.Operator); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
}

// The gateway's upstreams (which command runs, signing as which principal)
// and the hook's mapping are read through a running server, so their
// readers check the seal themselves (ReadSealed), against the registry the
// backend reports: an edit made while the server runs is refused there too.
func TestReadSealed(t *testing.T) {
	ctx := t.Context()
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.E.Close()
	w.E = nil
	ups := filepath.Join(w.Dir, pedigree.MCPConfigFile)
	os.MkdirAll(filepath.Dir(ups), 0o700)
	good := []byte(`{"version":1,"upstreams":[{"name":"web","principal":"tool:web","command":"web-server"}]}`)
	os.WriteFile(ups, good, 0o600)
	sealRefused(t, w, "mcp/upstreams.json was added since the seal")
	if err := pedigree.Seal(ctx, w.Dir, w.Operator); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	view, err := w.E.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := pedigree.ReadSealed(w.Dir, view, pedigree.MCPConfigFile); err != nil || string(b) != string(good) {
		t.Fatalf("sealed upstreams: %q %v", b, err)
	}
	if _, err := pedigree.ReadSealed(w.Dir, view, pedigree.HookMappingFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a mapping sealed as absent: %v", err)
	}
	refused := func(name, want string) {
		t.Helper()
		_, err := pedigree.ReadSealed(w.Dir, view, name)
		if !errors.Is(err, pedigree.ErrConfigSeal) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: want %q, got %v", name, want, err)
		}
	}
	// While the engine (a server) runs: the upstream's command and
	// principal rewritten, the mapping added, the file removed.
	os.WriteFile(ups, []byte(`{"version":1,"upstreams":[{"name":"web","principal":"agent:mcp","command":"sh"}]}`), 0o600)
	refused(pedigree.MCPConfigFile, "mcp/upstreams.json was changed since the seal")
	os.WriteFile(filepath.Join(w.Dir, pedigree.HookMappingFile), []byte("version: 1\n"), 0o600)
	refused(pedigree.HookMappingFile, "claude-hook.yaml was added since the seal")
	os.Remove(ups)
	refused(pedigree.MCPConfigFile, "mcp/upstreams.json was removed since the seal")
	os.WriteFile(ups, good, 0o600)
	// A view of another freeze, and a seal that is not the operator's.
	other := *view
	other.FreezeDigest = strings.Repeat("0", 64)
	if _, err := pedigree.ReadSealed(w.Dir, &other, pedigree.MCPConfigFile); !errors.Is(err, pedigree.ErrConfigSeal) {
		t.Fatalf("a seal of another freeze: %v", err)
	}
	other = *view
	other.OperatorKey = w.Keys["user:alice"].Public().(ed25519.PublicKey)
	if _, err := pedigree.ReadSealed(w.Dir, &other, pedigree.MCPConfigFile); !errors.Is(err, pedigree.ErrConfigSeal) {
		t.Fatalf("a seal checked with another key: %v", err)
	}
	if _, err := pedigree.ReadSealed(w.Dir, view, "serve.json"); !errors.Is(err, pedigree.ErrOptions) {
		t.Fatalf("a file the seal does not cover: %v", err)
	}
	os.Remove(filepath.Join(w.Dir, pedigree.HookMappingFile))
}

// A FIFO or a huge file in a configuration file's place is refused at once,
// not read until it hangs or fills memory.
func TestConfigFileNotRegular(t *testing.T) {
	w := enginetest.NewOnDisk(t, enginetest.Default)
	w.E.Close()
	w.E = nil
	tools := filepath.Join(w.Dir, pedigree.ToolsFile)
	if err := syscall.Mkfifo(tools, 0o644); err != nil {
		t.Skip(err)
	}
	if err := w.Reopen(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO as tools.yaml: %v", err)
	}
	os.Remove(tools)
	f, _ := os.Create(tools)
	f.Truncate(pedigree.MaxConfigBytes + 1)
	f.Close()
	if err := w.Reopen(); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Fatalf("a huge tools.yaml: %v", err)
	}
	os.Remove(tools)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
}
