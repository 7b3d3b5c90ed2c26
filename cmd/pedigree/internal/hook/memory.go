package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/lineage"
)

// A memory server behind Claude Code (the reference memory server's tools,
// mcp__SERVER__create_entities and the rest) keeps what the agent wrote and
// gives it back. As the gateway does, with the gateway's items (each bound
// to its entity: gateway.MemoryWriteItems, MemoryGraphItems), the hook records each item a write
// stores as the agent's memory entry, derived from the write's call, and a
// read whose every item is such an entry derives from them (signed by the
// agent: it holds nothing the agent did not write); a read with any other
// item is the MCP server's output, as the mapping says.

var (
	memoryWriteTools = map[string]bool{"create_entities": true, "add_observations": true, "create_relations": true}
	memoryReadTools  = map[string]bool{"read_graph": true, "search_nodes": true, "open_nodes": true}
)

// memoryItems are the items of an MCP memory tool's event: what a write
// stores (write true), or what a read returned. A read whose answer is not
// a knowledge graph has no items.
func memoryItems(ev *Event) (items []string, write bool) {
	// mcp__SERVER__TOOL, or through the gateway mcp__SERVER__UPSTREAM__TOOL.
	parts := strings.Split(ev.ToolName, "__")
	if len(parts) < 3 || parts[0] != "mcp" || ev.HookEventName != PostToolUse {
		return nil, false
	}
	switch tool := parts[len(parts)-1]; {
	case memoryWriteTools[tool]:
		canon, err := lineage.CanonicalArgs(ev.ToolInput)
		if err != nil {
			return nil, false
		}
		items, err := gateway.MemoryWriteItems(tool, canon)
		if err != nil {
			return nil, false
		}
		return items, true
	case memoryReadTools[tool]:
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.ToolResponse, &blocks) != nil {
			return nil, false
		}
		for _, b := range blocks {
			// Strictly: a field the items leave out would reach the model
			// unrecorded.
			if b.Type != "text" {
				return nil, false
			}
			got, ok := gateway.MemoryGraphItems(b.Text)
			if !ok {
				return nil, false
			}
			items = append(items, got...)
		}
		return items, false
	}
	return nil, false
}

// ownItems are the agent's memory entries holding each item, when every
// item has one (ok).
func (h *Handler) ownItems(ctx context.Context, items []string) (ps []lineage.Parent, ok bool, err error) {
	seen := map[string]bool{}
	for _, it := range items {
		ids, err := h.ownContent(ctx, []byte(it))
		if err != nil || len(ids) == 0 {
			return nil, false, err
		}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				ps = append(ps, lineage.Parent{ID: id, Weight: 1})
			}
		}
	}
	if len(ps) >= lineage.MaxParents/2 {
		return nil, false, nil
	}
	return ps, true, nil
}

// recordItems records what a memory write stored, one memory entry per
// item, signed by the agent, derived from base (the write's call).
func (h *Handler) recordItems(ctx context.Context, ev *Event, items []string, base []lineage.Parent) ([]lineage.Parent, error) {
	if len(items) > maxMemoryItems {
		return nil, fmt.Errorf("%w: %d memory items in one write, more than %d", ErrEvent, len(items), maxMemoryItems)
	}
	s, err := h.signer(ctx, h.m.Agent)
	if err != nil {
		return nil, err
	}
	var out []lineage.Parent
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it] {
			continue
		}
		seen[it] = true
		n, err := h.b.Record(ctx, s, pedigree.Entry{Principal: h.m.Agent, Kind: lineage.KindMemory, Session: ev.SessionID,
			Content: []byte(it), StoreContent: len(it) <= MaxStoredContent, Parents: base})
		if err != nil {
			return nil, err
		}
		out = append(out, lineage.Parent{ID: n.ID, Weight: 1})
	}
	return out, nil
}
