package gate

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The exact view: protected arguments first and whole, whatever their
// names sort as; data shortened on a character boundary, saying how much
// was left out; an argument without a known rule shown as protected; the
// rule read from the logged input as the policy saw it.
func TestPendingView(t *testing.T) {
	input := []byte(`{"tool":{"args":{"a_memo":{"trusted":false},"to":{"trusted":true}}},
		"arguments":{"a_memo":{"explicit":false,"sources":[{"id":"` + strings.Repeat("1", 64) + `","principal":"user:alice","effective_tier":"user"}]},
		"to":{"explicit":true,"sources":[{"id":"` + strings.Repeat("2", 64) + `","principal":"tool:web","effective_tier":"external"}]},
		"amount":{"explicit":false,"sources":[]}}}`)
	args, err := ArgumentsOf(input)
	if err != nil {
		t.Fatal(err)
	}
	if args["a_memo"].Protected || !args["to"].Protected || !args["amount"].Protected {
		t.Fatalf("protected as read from the logged input: %+v", args)
	}
	memo := strings.Repeat("é", 300) // 600 bytes
	p := &Pending{Args: []byte(`{"a_memo":"` + memo + `","amount":5000,"to":"999-666","z_unknown":"<b>"}`), Arguments: args}
	delete(p.Arguments, "z_unknown")
	lines, escaped := p.View()
	// The same view whatever order the arguments' map is read in (a sort
	// that ordered only some pairs would vary with it).
	for range 64 {
		if again, _ := p.View(); !slices.Equal(again, lines) {
			t.Fatalf("the view changed between two reads:\n%s\n--\n%s", strings.Join(lines, "\n"), strings.Join(again, "\n"))
		}
	}
	want := []string{
		`amount = 5000  [protected, shown whole; from the whole justification: none, the agent composed it]`,
		`to = "999-666"  [protected, shown whole; from explicit sources, 1 entry: tool:web (external) 222222222222]`,
		`z_unknown = "<b>"  [protected, shown whole; source not known]`,
	}
	if len(lines) != 4 || escaped != 0 {
		t.Fatalf("view: %d lines, %d escaped:\n%s", len(lines), escaped, strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], w)
		}
	}
	if m := lines[3]; !strings.HasPrefix(m, `a_memo = "é`) || !utf8.ValidString(m) ||
		!strings.Contains(m, "[data, 159 of 602 bytes shown, 443 left out; from the whole justification, 1 entry: user:alice (user) 111111111111]") {
		t.Errorf("data line: %s", m)
	}

	// Escaped, and counted; a value that is not an object is shown whole.
	p = &Pending{Args: []byte(`{"to":"999\u202e666"}`)}
	if lines, n := p.View(); n != 1 || lines[0] != `to = "999\u202e666"  [protected, shown whole; source not known]` {
		t.Errorf("escaped view: %q, %d", lines, n)
	}
}

// A short data argument is shown whole with no count of what was left out;
// untrusted sources (unverified or external) come before the others, each
// group once with its count, and past maxViewSources the rest are counted.
func TestPendingViewSources(t *testing.T) {
	id := func(c string) string { return strings.Repeat(c, 64) }
	src := func(c, principal, tier string) string {
		return `{"id":"` + id(c) + `","principal":"` + principal + `","effective_tier":"` + tier + `"}`
	}
	input := []byte(`{"tool":{"args":{"memo":{"trusted":false},"to":{"trusted":true},"cc":{"trusted":true},"bcc":{"trusted":true}}},
		"arguments":{"memo":{"explicit":true,"sources":[` + src("1", "user:alice", "user") + `,` + src("2", "tool:web", "external") + `]},
		"to":{"explicit":true,"sources":[` + src("1", "user:alice", "user") + `,` + src("3", "tool:mail", "unverified") + `,` + src("4", "tool:mail", "unverified") + `]},
		"cc":{"explicit":false,"sources":[` + src("1", "user:alice", "user") + `,` + src("5", "agent:a", "agent") + `,` + src("6", "agent:b", "agent") + `,` + src("7", "agent:c", "agent") + `,` + src("2", "tool:web", "external") + `]},
		"bcc":{"explicit":false,"sources":[` + src("1", "user:alice", "user") + `]}}}`)
	args, err := ArgumentsOf(input)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pending{Args: []byte(`{"memo":"hi","to":"a@b","cc":"c@d","bcc":"e@f"}`), Arguments: args}
	lines, _ := p.View()
	want := []string{
		`bcc = "e@f"  [protected, shown whole; from the whole justification, 1 entry: user:alice (user) 111111111111]`,
		`cc = "c@d"  [protected, shown whole; from the whole justification, 5 entries: tool:web (external) 222222222222, user:alice (user) 111111111111, agent:a (agent) 555555555555, agent:b (agent) 666666666666, and 1 more]`,
		`to = "a@b"  [protected, shown whole; from explicit sources, 3 entries: tool:mail (unverified) ×2, user:alice (user) 111111111111]`,
		`memo = "hi"  [data; from explicit sources, 2 entries: tool:web (external) 222222222222, user:alice (user) 111111111111]`,
	}
	if len(lines) != len(want) {
		t.Fatalf("view: %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], w)
		}
	}
}
