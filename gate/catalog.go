package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree/trajectory"
)

// ArgRule says where one argument of a tool may come from.
type ArgRule struct {
	// Trusted: the argument's sources must all be trusted. False means the
	// argument may carry untrusted text (a subject line, a note).
	Trusted bool `json:"trusted"`
}

// Tool is a tool's entry in the catalog.
type Tool struct {
	// Sensitive is nil when the entry does not say: such a tool is
	// sensitive. Only an explicit false skips the checks.
	Sensitive      *bool           `json:"sensitive,omitempty"`
	Irreversible   bool            `json:"irreversible"`
	ExternalSink   bool            `json:"external_sink"`
	Role           trajectory.Role `json:"role,omitempty"`
	AskOnUntrusted bool            `json:"ask_on_untrusted"`
	// OnSteered is the outcome of a call whose control justification is
	// tainted but whose protected arguments all come from explicit, trusted
	// sources: the decision may have been steered, the data was not.
	// "ask" (the default, when empty), "deny" (delete-like tools) or "allow".
	OnSteered Outcome `json:"on_steered,omitempty"`
	// OnDelegated is the outcome of a delegated call: one that carries out
	// a plan step whose delegated argument comes from exactly the source
	// the plan names (the file or message the user pointed at), whose
	// content is untrusted. "ask" (the default, when empty: a person
	// confirms the value), "deny", or "allow" where the operator accepts
	// that whoever controls the source controls the value.
	OnDelegated Outcome            `json:"on_delegated,omitempty"`
	Args        map[string]ArgRule `json:"args,omitempty"`
	// RecipientArg names the argument that holds a send's recipient, for
	// the trajectory detector's external-recipient signal.
	RecipientArg string `json:"recipient_arg,omitempty"`
}

// Catalog is the tool catalog: data, not code, loaded from tools.yaml in the
// data directory or from --tools FILE.
type Catalog struct {
	Tools map[string]Tool `json:"tools"`
	// InternalDomains are the recipient domains that are not external. An
	// entry matches exactly (example.com matches bob@example.com, not
	// bob@mail.example.com); *.example.com matches every subdomain of
	// example.com, and not example.com itself.
	InternalDomains []string `json:"internal_domains,omitempty"`
	// Aliases map an operator's tool names onto the catalog's (see
	// catalogs.go).
	Aliases map[string]string `json:"aliases,omitempty"`
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ParseCatalog reads a catalog from YAML or JSON, strictly: a duplicate key
// is an error, and every key must be a field's name exactly (encoding/json
// would fold case and Unicode, so that `SENSITIVE` or `ſensitive` set
// `sensitive`); anything else is an unknown field, not a silently ignored
// typo.
func ParseCatalog(b []byte) (*Catalog, error) {
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCatalog, err)
	}
	if err := exactKeys(j, reflect.TypeFor[Catalog](), "catalog"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCatalog, err)
	}
	var c Catalog
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCatalog, err)
	}
	if c.Tools == nil {
		c.Tools = map[string]Tool{}
	}
	for _, d := range c.InternalDomains {
		if err := checkDomain(d); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCatalog, err)
		}
	}
	for name, t := range c.Tools {
		if !toolName.MatchString(name) {
			return nil, fmt.Errorf("%w: tool name %q", ErrCatalog, name)
		}
		if t.Role == "" {
			t.Role = trajectory.Other
			c.Tools[name] = t
		}
		if _, err := trajectory.ParseRole(string(t.Role)); err != nil {
			return nil, fmt.Errorf("%w: tool %s: %v", ErrCatalog, name, err)
		}
		if err := checkOutcome("on_steered", t.OnSteered); err != nil {
			return nil, fmt.Errorf("%w: tool %s: %v", ErrCatalog, name, err)
		}
		if err := checkOutcome("on_delegated", t.OnDelegated); err != nil {
			return nil, fmt.Errorf("%w: tool %s: %v", ErrCatalog, name, err)
		}
	}
	for alias := range c.Aliases {
		// Whether an alias names a tool is checked once the catalogs are
		// merged (LoadCatalogs): it may name one in another file.
		if !toolName.MatchString(alias) {
			return nil, fmt.Errorf("%w: alias name %q", ErrCatalog, alias)
		}
	}
	return &c, nil
}

// LoadCatalog reads a catalog file.
func LoadCatalog(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCatalog, err)
	}
	c, err := ParseCatalog(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Lookup returns a tool's entry. A tool missing from the catalog is treated
// as sensitive (its Sensitive is nil) and irreversible: unknown means
// careful.
func (c *Catalog) Lookup(name string) (Tool, bool) {
	if c != nil {
		if t, ok := c.Tools[name]; ok {
			return t, true
		}
		if t, ok := c.Tools[c.Aliases[name]]; ok {
			return t, true
		}
	}
	return Tool{Irreversible: true, Role: trajectory.Other}, false
}

// IsSensitive reports whether the checks apply: unless the entry says
// `sensitive: false`, they do.
func (t Tool) IsSensitive() bool { return t.Sensitive == nil || *t.Sensitive }

// RoleOf is a tool's trajectory role.
func (c *Catalog) RoleOf(name string) trajectory.Role {
	t, _ := c.Lookup(name)
	return t.Role
}

func (c *Catalog) digest() []byte {
	b, _ := json.Marshal(c)
	return b
}

// TrajectoryCall maps a call to its trajectory step: its role and, for a
// send, what is known of its recipients. A send is external when any
// recipient is outside the operator's domains or cannot be parsed (a name
// without an address counts as external: the soft signal errs towards
// alerting). A send whose recipients are unknown (the catalog names no
// recipient_arg, or the call does not carry it) is neither: the rules then
// judge its structure alone. (Whether the recipient descends from untrusted
// content needs lineage; the gate adds it.)
func (c *Catalog) TrajectoryCall(tool string, args map[string]any) trajectory.Call {
	t, _ := c.Lookup(tool)
	call := trajectory.Call{Tool: tool, Role: t.Role}
	if t.Role != trajectory.Send || t.RecipientArg == "" {
		return call
	}
	r := parseRecipients(args[t.RecipientArg])
	call.RecipientKnown = r.known()
	call.RecipientExternal = len(r.unparsed) > 0
	for _, a := range r.addresses {
		if !c.internal(a) {
			call.RecipientExternal = true
			break
		}
	}
	return call
}

// checkOutcome refuses an on_steered or on_delegated that is not an
// outcome: a typo must not silently mean the default.
func checkOutcome(field string, o Outcome) error {
	switch o {
	case "", Ask, Deny, Allow:
		return nil
	}
	return fmt.Errorf("%s %q: want ask, deny or allow", field, o)
}

// exactKeys checks that every object key in the JSON j names a field of t
// (a struct, a map of them, a pointer to one) exactly, as its json tag
// spells it.
func exactKeys(j []byte, t reflect.Type, where string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(j, &m); err != nil || m == nil {
			return nil // not an object: the typed decoder says why
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for k, v := range m {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: unknown field %q (keys match exactly)", where, k)
			}
			if err := exactKeys(v, ft, where+"."+k); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(j, &m); err != nil {
			return nil
		}
		for k, v := range m {
			if err := exactKeys(v, t.Elem(), where+"."+k); err != nil {
				return err
			}
		}
	}
	// A list (internal_domains) holds strings: no keys. The catalog has
	// no list of objects; one would need a case here.
	return nil
}
