package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pedigree-ai/pedigree/internal/safetext"
)

// MaxDataView is how many bytes of an argument that is not protected the
// exact view shows; a protected argument is always shown whole.
const MaxDataView = 160

// maxViewSources is how many distinct sources one argument's line names.
const maxViewSources = 4

// View is the exact view of the call for the person asked to approve it:
// one line per argument, the protected ones first, each whole, with where
// its value came from; then the others (data, which may be untrusted text),
// each shortened to MaxDataView bytes on a character boundary, saying how
// much was left out. An argument whose rule is not known (the decision
// failed closed before the policy ran) is shown as protected: unknown means
// careful. Every value is escaped for a terminal (safetext.Line); the
// second result is how many characters were.
//
// Sorting by name (canonical JSON) and clipping the whole would let a long
// harmless argument push the recipient out of view: hence this order.
func (p *Pending) View() ([]string, int) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(p.Args, &args); err != nil || args == nil {
		s, n := safetext.Escape(string(p.Args), safetext.Line)
		return []string{"arguments " + s}, n
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	protected := func(name string) bool {
		a, ok := p.Arguments[name]
		return !ok || a.Protected
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, pb := protected(a), protected(b)
		switch {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return strings.Compare(a, b)
	})
	lines := make([]string, 0, len(names))
	escaped := 0
	for _, name := range names {
		value := plain(args[name])
		var line string
		if protected(name) {
			line = fmt.Sprintf("%s = %s  [protected, shown whole; %s]", name, value, p.from(name))
		} else {
			shown, left := safetext.Clip(value, MaxDataView)
			line = fmt.Sprintf("%s = %s  [data; %s]", name, shown, p.from(name))
			if left > 0 {
				line = fmt.Sprintf("%s = %s…  [data, %d of %d bytes shown, %d left out; %s]", name, shown, len(shown), len(value), left, p.from(name))
			}
		}
		e, n := safetext.Escape(line, safetext.Line)
		lines = append(lines, e)
		escaped += n
	}
	return lines, escaped
}

// plain is a value as JSON without HTML escaping: the person reads < as <.
func plain(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// from says where an argument's value came from: its explicit sources, or
// the whole justification, as principals and tiers with how many entries.
func (p *Pending) from(name string) string {
	a, ok := p.Arguments[name]
	if !ok {
		return "source not known"
	}
	where := "from the whole justification"
	if a.Explicit {
		where = "from explicit sources"
	}
	if len(a.Sources) == 0 {
		return where + ": none, the agent composed it"
	}
	type group struct {
		what      string
		untrusted bool
		n         int
		id        string // the entry, when the group has one
	}
	var groups []*group
	byWhat := map[string]*group{}
	for _, s := range a.Sources {
		what := fmt.Sprintf("%s (%s)", s.Principal, s.EffectiveTier)
		if g := byWhat[what]; g != nil {
			g.n++
			continue
		}
		g := &group{what: what, untrusted: s.EffectiveTier == "unverified" || s.EffectiveTier == "external", n: 1, id: s.ID}
		byWhat[what] = g
		groups = append(groups, g)
	}
	// Untrusted sources first: they are what the person must see.
	slices.SortStableFunc(groups, func(a, b *group) int {
		switch {
		case a.untrusted && !b.untrusted:
			return -1
		case b.untrusted && !a.untrusted:
			return 1
		}
		return 0
	})
	parts := make([]string, 0, min(len(groups), maxViewSources)+1)
	for i, g := range groups {
		if i == maxViewSources {
			parts = append(parts, fmt.Sprintf("and %d more", len(groups)-i))
			break
		}
		if g.n > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", g.what, g.n))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", g.what, short(g.id)))
		}
	}
	entries := "entry"
	if len(a.Sources) > 1 {
		entries = "entries"
	}
	return fmt.Sprintf("%s, %d %s: %s", where, len(a.Sources), entries, strings.Join(parts, ", "))
}
