package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// TestCatalogEntryWithoutSensitiveIsSensitive: only an explicit
// `sensitive: false` skips the checks; an entry that does not say (or an
// empty one) is checked like a tool the catalog does not know.
func TestCatalogEntryWithoutSensitiveIsSensitive(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       gate.Outcome
	}{
		{"no sensitive field", "tools:\n  send_money: {irreversible: true, external_sink: true, role: send}\n", gate.Deny},
		{"empty entry", "tools:\n  send_money: {}\n", gate.Deny},
		{"args only", "tools:\n  send_money: {args: {to: {trusted: true}}}\n", gate.Deny},
		{"sensitive true", "tools:\n  send_money: {sensitive: true}\n", gate.Deny},
		{"explicitly not sensitive", "tools:\n  send_money: {sensitive: false}\n", gate.Allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := gate.ParseCatalog([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			w := enginetest.New(t, enginetest.Default, pedigree.WithCatalog(cat))
			_, _, memory := laundered(w)
			d := w.Check("agent:planner", pedigree.Call{Session: "s1", Tool: "send_money", Args: []byte(`{"to":"999-666"}`), Justification: []string{memory.ID}})
			if d.Decision != tc.want {
				t.Fatalf("got %s %v, want %s", d.Decision, d.Reasons, tc.want)
			}
		})
	}
}

// TestCatalogKeysMatchExactly: encoding/json folds case and Unicode
// (U+017F ſ folds to s), so `ſensitive: false` or `SENSITIVE` would set
// `sensitive`. Every key must be a field's name exactly; anything else, and
// a duplicate key, is an unknown-field error.
func TestCatalogKeysMatchExactly(t *testing.T) {
	for _, src := range []string{
		"tools:\n  send_money: {ſensitive: false}\n",
		"tools:\n  send_money: {SENSITIVE: true, sensitive: false}\n",
		"tools:\n  send_money: {sensitive: false, SENSITIVE: true}\n",
		"tools:\n  send_money: {Sensitive: false}\n",
		"tools:\n  send_money: {sensitive: true, args: {to: {Trusted: false}}}\n",
		"Tools:\n  send_money: {sensitive: false}\n",
		"tools: {}\nINTERNAL_DOMAINS: [example.com]\n",
		"tools:\n  send_money: {sensitive: true, sensitive: false}\n",
		`{"tools": {"send_money": {"ſensitive": false}}}`,
		`{"tools": {"send_money": {"sensitive": true, "sensitive": false}}}`,
	} {
		_, err := gate.ParseCatalog([]byte(src))
		if !errors.Is(err, gate.ErrCatalog) {
			t.Errorf("%q: got %v, want a catalog error", src, err)
		}
	}
	_, err := gate.ParseCatalog([]byte("tools:\n  send_money: {ſensitive: false}\n"))
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("got %v, want it named an unknown field", err)
	}
	cat, err := gate.ParseCatalog([]byte("internal_domains: [example.com]\ntools:\n  send_money: {sensitive: false, role: send, args: {to: {trusted: true}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tl, _ := cat.Lookup("send_money"); tl.IsSensitive() || !tl.Args["to"].Trusted || cat.InternalDomains[0] != "example.com" {
		t.Fatalf("exact keys misread: %+v", tl)
	}
}
