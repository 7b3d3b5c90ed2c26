package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// The reference memory server's tools that the gateway follows.
var (
	memoryWrites = map[string]bool{"create_entities": true, "add_observations": true, "create_relations": true}
	memoryReads  = map[string]bool{"read_graph": true, "search_nodes": true, "open_nodes": true}
)

// IsMemoryServer reports whether a server offers the reference memory
// server's tools, so that its writes and reads are followed.
func IsMemoryServer(tools []*mcp.Tool) bool {
	have := map[string]bool{}
	for _, t := range tools {
		have[t.Name] = true
	}
	return have["create_entities"] && have["add_observations"] && have["open_nodes"] && have["read_graph"]
}

// CatalogKey is a gateway tool's key in the tool catalog: NAME.TOOL.
func CatalogKey(upstream, tool string) string { return upstream + "." + tool }

// Draft proposes catalog entries for an upstream's tools from their
// annotations, which the operator reviews: a tool the server says is
// read-only is not sensitive; anything else is. Absent hints take the MCP
// defaults (destructive and open-world unless said otherwise), so a tool
// that says nothing is treated as irreversible and an external sink. A
// sensitive tool asks (ask_on_untrusted) instead of being denied on an
// untrusted context.
//
// An external upstream's annotations are that party's own claims: every
// tool of an external upstream is an external sink (what is sent to it
// leaves), whatever openWorldHint says. At run time the gateway decides
// from the catalog alone: an annotation changed later (a rug pull) changes
// nothing but what the session records (listing.go).
func Draft(upstream string, tools []*mcp.Tool, memory, external bool) map[string]gate.Tool {
	out := map[string]gate.Tool{}
	for _, t := range tools {
		a := t.Annotations
		if a == nil {
			a = &mcp.ToolAnnotations{}
		}
		// Sensitive is always written out: the operator reviewing the
		// draft sees the choice made for every tool.
		sensitive := !a.ReadOnlyHint
		e := gate.Tool{Role: trajectory.Other, Sensitive: &sensitive}
		if sensitive {
			e.Irreversible = a.DestructiveHint == nil || *a.DestructiveHint
			e.ExternalSink = a.OpenWorldHint == nil || *a.OpenWorldHint
			// Ask rather than deny where a person can tell: through the
			// host's elicitation with --approver, else the refusal names
			// the command that approves it.
			e.AskOnUntrusted = true
		}
		if external {
			e.ExternalSink = true
		}
		if memory && memoryReads[t.Name] {
			e.Role = trajectory.Recall
		}
		if memory && memoryWrites[t.Name] {
			e.Role = trajectory.Save
		}
		out[CatalogKey(upstream, t.Name)] = e
	}
	return out
}

// MergeCatalog adds drafted entries to the catalog file at path (created
// when missing). Entries already there are the operator's and are kept.
// It returns the keys it added.
func MergeCatalog(path string, drafts map[string]gate.Tool) ([]string, error) {
	cat := &gate.Catalog{Tools: map[string]gate.Tool{}}
	if _, err := os.Stat(path); err == nil {
		if cat, err = gate.LoadCatalog(path); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var added []string
	for k, t := range drafts {
		if _, ok := cat.Tools[k]; !ok {
			cat.Tools[k] = t
			added = append(added, k)
		}
	}
	sort.Strings(added)
	if len(added) == 0 {
		return nil, nil
	}
	b, err := yaml.Marshal(cat)
	if err != nil {
		return nil, err
	}
	if _, err := gate.ParseCatalog(b); err != nil {
		return nil, fmt.Errorf("the drafted catalog does not load: %w", err)
	}
	return added, safefile.WriteFile(filepath.Dir(path), filepath.Base(path), b, 0o600)
}
