package gate

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/trajectory"
	"github.com/pedigree-ai/pedigree/trajectory/offline"
)

func TestParseRecipients(t *testing.T) {
	cases := []struct {
		name      string
		arg       string // the argument as JSON
		addresses []string
		unparsed  []string
	}{
		{"one address", `"bob@example.com"`, []string{"bob@example.com"}, nil},
		{"name and address", `"Bob Jones <bob@example.com>"`, []string{"bob@example.com"}, nil},
		{"quoted name with a comma", `"\"Jones, Bob\" <bob@example.com>"`, []string{"bob@example.com"}, nil},
		{"comma-separated", `"bob@example.com, jane@partner.net"`, []string{"bob@example.com", "jane@partner.net"}, nil},
		{"semicolon-separated", `"bob@example.com; Jane <jane@partner.net>"`, []string{"bob@example.com", "jane@partner.net"}, nil},
		{"trailing separator", `"bob@example.com;"`, []string{"bob@example.com"}, nil},
		{"list", `["team@corp.example", "auditor@elsewhere.example"]`, []string{"team@corp.example", "auditor@elsewhere.example"}, nil},
		{"list of name and address forms", `["Team <team@corp.example>", "a@x.org, b@y.org"]`, []string{"team@corp.example", "a@x.org", "b@y.org"}, nil},
		{"JSON list in a string", `"[\"a@x.org\", \"b@y.org\"]"`, []string{"a@x.org", "b@y.org"}, nil},
		{"name without an address", `"Bob Jones"`, nil, []string{"Bob Jones"}},
		{"names without addresses", `["Bob", "Carol"]`, nil, []string{"Bob", "Carol"}},
		{"a name among addresses", `"bob@example.com, Carol"`, []string{"bob@example.com"}, []string{"Carol"}},
		{"name then a bare address", `"Bob bob@example.com"`, nil, []string{"Bob bob@example.com"}},
		{"not a string", `42`, nil, []string{"42"}},
		{"an object", `{"email": "bob@example.com"}`, nil, []string{"map[email:bob@example.com]"}},
		{"a list item that is not a string", `["bob@example.com", {"email": "x@evil.test"}]`, []string{"bob@example.com"}, []string{"map[email:x@evil.test]"}},
		{"empty string", `""`, nil, nil},
		{"blank string", `" , ; "`, nil, nil},
		{"empty list", `[]`, nil, nil},
		{"null", `null`, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(c.arg), &v); err != nil {
				t.Fatal(err)
			}
			got := parseRecipients(v)
			if !slices.Equal(got.addresses, c.addresses) || !slices.Equal(got.unparsed, c.unparsed) {
				t.Fatalf("got addresses %q unparsed %q, want %q %q", got.addresses, got.unparsed, c.addresses, c.unparsed)
			}
		})
	}
}

func TestInternalDomains(t *testing.T) {
	c := &Catalog{InternalDomains: []string{"example.com", "*.corp.example", "Mixed.Case.ORG"}}
	cases := []struct {
		addr string
		want bool
	}{
		{"bob@example.com", true},
		{"BOB@EXAMPLE.COM", true},
		{"bob@example.com.", true},
		// Exact: a subdomain of a listed domain is not the domain.
		{"bob@evil.example.com", false},
		{"bob@mail.example.com", false},
		{"bob@notexample.com", false},
		{"bob@example.com.evil.test", false},
		// Wildcard: every subdomain, not the domain itself.
		{"team@eu.corp.example", true},
		{"team@a.b.corp.example", true},
		{"team@corp.example", false},
		{"team@xcorp.example", false},
		{"x@mixed.case.org", true},
		{"no-domain", false},
		{"bob@", false},
		// No name before the @: not an address of the domain.
		{"@example.com", false},
		{"a@example.com", true},
	}
	for _, tc := range cases {
		if got := c.internal(tc.addr); got != tc.want {
			t.Errorf("internal(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestCatalogRefusesBadDomains(t *testing.T) {
	for _, d := range []string{`""`, `"*."`, `"mail.*.example.com"`, `"*example.com"`, `"bob@example.com"`, `".example.com"`, `"a..b"`, `"example .com"`} {
		_, err := ParseCatalog([]byte(`{"internal_domains": [` + d + `], "tools": {}}`))
		if !errors.Is(err, ErrCatalog) {
			t.Errorf("internal domain %s: got %v, want ErrCatalog", d, err)
		}
	}
	if _, err := ParseCatalog([]byte(`{"internal_domains": ["example.com", "*.example.com", "Example.ORG."], "tools": {}}`)); err != nil {
		t.Fatal(err)
	}
}

func TestTrajectoryCallRecipients(t *testing.T) {
	cat, err := ParseCatalog([]byte(`
internal_domains: [example.com, "*.example.com"]
tools:
  email_send: {sensitive: true, role: send, recipient_arg: to}
  notify: {sensitive: true, role: send}
  memory_recall: {sensitive: false, role: recall}
`))
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ known, external bool }
	cases := []struct {
		name string
		tool string
		args string
		want want
	}{
		{"internal address", "email_send", `{"to": "bob@example.com"}`, want{true, false}},
		{"internal subdomain by wildcard", "email_send", `{"to": "team@mail.example.com"}`, want{true, false}},
		{"external address", "email_send", `{"to": "jane@partner.net"}`, want{true, true}},
		{"name and external address", "email_send", `{"to": "Jane <jane@partner.net>"}`, want{true, true}},
		{"list, all internal", "email_send", `{"to": ["bob@example.com", "Carol <carol@example.com>"]}`, want{true, false}},
		{"list, one external", "email_send", `{"to": ["team@example.com", "auditor@elsewhere.example"]}`, want{true, true}},
		{"comma string, one external", "email_send", `{"to": "bob@example.com, drop@exfil.site"}`, want{true, true}},
		{"semicolon string, all internal", "email_send", `{"to": "bob@example.com; carol@example.com"}`, want{true, false}},
		{"name only counts as external", "email_send", `{"to": "Bob Jones"}`, want{true, true}},
		{"internal address and a name", "email_send", `{"to": ["bob@example.com", "Carol"]}`, want{true, true}},
		{"wrong type counts as external", "email_send", `{"to": 7}`, want{true, true}},
		{"no arguments", "email_send", `null`, want{false, false}},
		{"no recipient argument", "email_send", `{"subject": "hi"}`, want{false, false}},
		{"empty recipient", "email_send", `{"to": ""}`, want{false, false}},
		{"empty list", "email_send", `{"to": []}`, want{false, false}},
		{"catalog names no recipient_arg", "notify", `{"to": "drop@exfil.site"}`, want{false, false}},
		{"unknown tool", "mystery_send", `{"to": "drop@exfil.site"}`, want{false, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var args map[string]any
			if err := json.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
			got := cat.TrajectoryCall(c.tool, args)
			if got.RecipientKnown != c.want.known || got.RecipientExternal != c.want.external {
				t.Fatalf("known %v external %v, want %+v", got.RecipientKnown, got.RecipientExternal, c.want)
			}
			if got.Role == trajectory.Send && got.RecipientUnknown() != (!c.want.known && !c.want.external) {
				t.Fatalf("RecipientUnknown() = %v", got.RecipientUnknown())
			}
		})
	}
	if c := cat.TrajectoryCall("memory_recall", map[string]any{"to": "x@y.z"}); c.Role != trajectory.Recall || c.RecipientKnown || c.RecipientExternal || c.RecipientUnknown() {
		t.Fatalf("a recall has no recipient: %+v", c)
	}
}

// TestGeneratedSessionsRecipients runs every send of the generated sessions
// (all the recipient shapes of `trajectory generate`) through the catalog
// they ship with, against what the generator put in them.
func TestGeneratedSessionsRecipients(t *testing.T) {
	cat, err := LoadCatalog(filepath.Join("..", "testdata", "trajectory", "tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const internal, external, unknown = "internal", "external", "unknown"
	got := map[string]int{}
	for _, s := range offline.Generate(offline.GenerateOptions{Sessions: 1000, Seed: 5}) {
		kind := s.ID[strings.LastIndex(s.ID, s.Label)+len(s.Label)+1:]
		nth := 0
		for i, c := range s.Calls {
			if c.Tool != "email_send" {
				continue
			}
			nth++
			tc := cat.TrajectoryCall(c.Tool, c.Args)
			class := internal
			if tc.RecipientExternal {
				class = external
			} else if tc.RecipientUnknown() {
				class = unknown
			}
			got[class]++
			to, hasTo := c.Args["to"]
			str, isString := to.(string)
			// What the generator sent to: the attacker, or a customer, is
			// external; colleagues are internal; names without addresses
			// count as external, no arguments as unknown.
			want := internal
			switch {
			case !hasTo:
				want = unknown
			case isString && !strings.Contains(str, "@"):
				want = external
			case s.Label == "attack", kind == "grounded-external", kind == "send-recall-send" && nth == 2:
				want = external
			case kind == "no-recall":
				continue // a colleague or a customer, at random
			}
			if class != want {
				t.Errorf("%s call %d (%s) to %v: %s, want %s", s.ID, i, kind, to, class, want)
			}
		}
	}
	for _, class := range []string{internal, external, unknown} {
		if got[class] == 0 {
			t.Errorf("no %s send in the generated sessions (%v)", class, got)
		}
	}
}

// FuzzRecipients: a recipient argument is untrusted input. Whatever it is,
// parsing does not panic, every address has a domain, and adding an
// outsider to it makes the send external: no string can swallow the
// recipient after it.
func FuzzRecipients(f *testing.F) {
	for _, s := range []string{"bob@example.com", "Bob <bob@example.com>", `"Doe, J" <j@x.org>; k@y.org`, `["a@x.org"]`, "Bob", "", `"unclosed`, "<a@example.com", `"\`, "a@example.com (comment"} {
		f.Add(s)
	}
	cat := &Catalog{InternalDomains: []string{"example.com", "*.example.com"}, Tools: map[string]Tool{
		"send": {Role: trajectory.Send, RecipientArg: "to"},
	}}
	f.Fuzz(func(t *testing.T, s string) {
		r := parseRecipients(s)
		for _, a := range r.addresses {
			if !strings.Contains(a, "@") {
				t.Fatalf("address %q has no domain", a)
			}
		}
		if c := cat.TrajectoryCall("send", map[string]any{"to": s}); len(r.unparsed) > 0 && !c.RecipientExternal {
			t.Fatalf("%q: unparsed %q, yet not external", s, r.unparsed)
		}
		for _, sep := range []string{", ", ";"} {
			c := cat.TrajectoryCall("send", map[string]any{"to": s + sep + "drop@exfil.site"})
			if !c.RecipientExternal || !c.RecipientKnown {
				t.Fatalf("%q then an outsider: known %v external %v", s, c.RecipientKnown, c.RecipientExternal)
			}
			list := cat.TrajectoryCall("send", map[string]any{"to": []any{s, "drop@exfil.site"}})
			if !list.RecipientExternal {
				t.Fatalf("[%q, outsider]: not external", s)
			}
		}
	})
}
