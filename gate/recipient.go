package gate

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
)

// recipients is what a send's recipient argument says: the addresses it
// names, and the parts that are not an address (a display name alone, a
// typo, a value of the wrong type).
type recipients struct {
	addresses []string
	unparsed  []string
}

// known reports whether the argument named anyone at all.
func (r recipients) known() bool { return len(r.addresses)+len(r.unparsed) > 0 }

// parseRecipients reads a recipient argument in the shapes real harnesses
// log: one address, `Name <addr>`, a comma- or semicolon-separated string of
// them, a list of such strings, or a string holding a JSON list. A value of
// any other type, or a list item that is not a string, is unparsed; an
// empty string or list names nobody.
func parseRecipients(v any) recipients {
	var r recipients
	switch v := v.(type) {
	case nil:
	case string:
		r.addString(v)
	case []any:
		for _, item := range v {
			if s, ok := item.(string); ok {
				r.addString(s)
			} else {
				r.unparsed = append(r.unparsed, fmt.Sprint(item))
			}
		}
	case []string:
		for _, s := range v {
			r.addString(s)
		}
	default:
		r.unparsed = append(r.unparsed, fmt.Sprint(v))
	}
	return r
}

func (r *recipients) addString(s string) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		var list []string
		if err := json.Unmarshal([]byte(s), &list); err == nil {
			for _, item := range list {
				r.addString(item)
			}
			return
		}
	}
	for _, part := range splitRecipients(s) {
		a, err := mail.ParseAddress(part)
		if err != nil {
			r.unparsed = append(r.unparsed, part)
			continue
		}
		r.addresses = append(r.addresses, a.Address)
	}
}

// splitRecipients splits on commas and semicolons outside double quotes and
// angle brackets, so `"Doe, Jane" <jane@x.org>; bob@y.org` is two parts.
// Empty parts are dropped.
func splitRecipients(s string) []string {
	var parts []string
	quoted, angle, escaped := false, false, false
	start := 0
	for i, c := range s {
		switch {
		case escaped:
			escaped = false
		case c == '\\' && quoted:
			escaped = true
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '<':
			angle = true
		case c == '>':
			angle = false
		case !angle && (c == ',' || c == ';'):
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	parts = append(parts, s[start:])
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// internal reports whether an address is in one of the operator's domains.
// A domain entry matches exactly; `*.example.com` matches every subdomain of
// example.com and not example.com itself. An address without a domain, or
// without a name before its @, is not internal.
func (c *Catalog) internal(addr string) bool {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 {
		return false
	}
	domain := normDomain(addr[at+1:])
	if domain == "" {
		return false
	}
	for _, d := range c.InternalDomains {
		d = normDomain(d)
		if sub, ok := strings.CutPrefix(d, "*."); ok {
			if strings.HasSuffix(domain, "."+sub) {
				return true
			}
		} else if domain == d {
			return true
		}
	}
	return false
}

// normDomain lower-cases a domain and drops the dot of a fully qualified
// name (example.com. is example.com).
func normDomain(d string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
}

// checkDomain refuses a catalog domain entry that could never match as its
// author meant: empty, an address, a wildcard anywhere but a leading "*.",
// or a character no domain name has.
func checkDomain(d string) error {
	n := normDomain(d)
	body := strings.TrimPrefix(n, "*.")
	switch {
	case body == "":
		return fmt.Errorf("internal domain %q is empty", d)
	case strings.Contains(body, "*"):
		return fmt.Errorf("internal domain %q: a wildcard may only lead, as in *.example.com", d)
	case strings.ContainsAny(body, "@ \t<>,;\"") || strings.HasPrefix(body, ".") || strings.Contains(body, ".."):
		return fmt.Errorf("internal domain %q is not a domain name", d)
	}
	return nil
}
