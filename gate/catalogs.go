package gate

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Several catalogs can be loaded at once (policies/catalogs/ holds one per
// toolset): they are merged, and a tool defined twice with different rules
// is an error, never a silent choice of one. An operator maps their own
// tool names onto a catalog's with aliases:
//
//	aliases:
//	  gmail_send_message: email_send
//
// An alias takes every rule of the tool it names; it must name a tool of
// the merged catalog and must not itself be a tool.

// LoadCatalogs reads and merges catalog files.
func LoadCatalogs(paths ...string) (*Catalog, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no catalog file", ErrCatalog)
	}
	cs := make([]*Catalog, 0, len(paths))
	for _, p := range paths {
		c, err := LoadCatalog(p)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return MergeCatalogs(cs...)
}

// MergeCatalogs merges catalogs: the union of their tools, aliases and
// internal domains. The same tool (or alias) with different rules in two of
// them is an error.
func MergeCatalogs(cs ...*Catalog) (*Catalog, error) {
	out := &Catalog{Tools: map[string]Tool{}, Aliases: map[string]string{}}
	domains := map[string]bool{}
	for _, c := range cs {
		for name, t := range c.Tools {
			if prev, ok := out.Tools[name]; ok && !reflect.DeepEqual(prev, t) {
				return nil, fmt.Errorf("%w: tool %s is defined twice with different rules", ErrCatalog, name)
			}
			out.Tools[name] = t
		}
		for alias, target := range c.Aliases {
			if prev, ok := out.Aliases[alias]; ok && prev != target {
				return nil, fmt.Errorf("%w: alias %s names both %s and %s", ErrCatalog, alias, prev, target)
			}
			out.Aliases[alias] = target
		}
		for _, d := range c.InternalDomains {
			if !domains[d] {
				domains[d] = true
				out.InternalDomains = append(out.InternalDomains, d)
			}
		}
	}
	if err := out.checkAliases(); err != nil {
		return nil, err
	}
	if len(out.Aliases) == 0 {
		out.Aliases = nil
	}
	return out, nil
}

// checkAliases: every alias names a tool, and no alias is a tool itself.
func (c *Catalog) checkAliases() error {
	for _, alias := range slices.Sorted(maps.Keys(c.Aliases)) {
		target := c.Aliases[alias]
		if !toolName.MatchString(alias) {
			return fmt.Errorf("%w: alias name %q", ErrCatalog, alias)
		}
		if _, ok := c.Tools[alias]; ok {
			return fmt.Errorf("%w: %s is both a tool and an alias", ErrCatalog, alias)
		}
		if _, ok := c.Tools[target]; !ok {
			return fmt.Errorf("%w: alias %s names %s, which no catalog defines", ErrCatalog, alias, target)
		}
	}
	return nil
}
