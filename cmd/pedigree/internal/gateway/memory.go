package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
)

// The reference memory server's knowledge graph, as its tools take and
// return it.
type (
	memEntity struct {
		Name         string   `json:"name"`
		EntityType   string   `json:"entityType"`
		Observations []string `json:"observations"`
	}
	memRelation struct {
		From         string `json:"from"`
		To           string `json:"to"`
		RelationType string `json:"relationType"`
	}
	memGraph struct {
		Entities  []memEntity   `json:"entities"`
		Relations []memRelation `json:"relations"`
	}
	memObservations struct {
		Observations []struct {
			EntityName string   `json:"entityName"`
			Contents   []string `json:"contents"`
		} `json:"observations"`
	}
)

// A memory item is one piece of what the memory server keeps, bound to its
// place there: an entity (its name and type), an observation (its text with
// the name of the entity it is about), a relation (its type with both
// ends). Each is one memory entry, found again by its content digest, so an
// observation moved to another entity in the server's file, or an entity
// given another type, is content no one wrote through the gateway.
func entityItem(e memEntity) string {
	b, _ := json.Marshal(map[string]string{"entity": e.Name, "entityType": e.EntityType})
	return string(b)
}

func observationItem(entity, text string) string {
	b, _ := json.Marshal(map[string]string{"entity": entity, "observation": text})
	return string(b)
}

func relationItem(r memRelation) string {
	b, _ := json.Marshal(map[string]string{"from": r.From, "relationType": r.RelationType, "to": r.To})
	return string(b)
}

func (gr memGraph) items() []string {
	var out []string
	for _, e := range gr.Entities {
		out = append(out, entityItem(e))
		for _, o := range e.Observations {
			out = append(out, observationItem(e.Name, o))
		}
	}
	for _, r := range gr.Relations {
		out = append(out, relationItem(r))
	}
	return dedupe(out)
}

// ParseMemoryFile reads the memory server's store (JSONL, one entity or
// relation a line, as memory.jsonl and memory.json hold it; or one JSON
// object with entities and relations) and returns its memory items.
func ParseMemoryFile(b []byte) ([]string, error) {
	var probe struct {
		Entities, Relations json.RawMessage
	}
	if json.Unmarshal(b, &probe) == nil && (probe.Entities != nil || probe.Relations != nil) {
		var whole memGraph
		if err := json.Unmarshal(b, &whole); err != nil {
			return nil, err
		}
		return whole.items(), nil
	}
	var gr memGraph
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec struct {
			Type string `json:"type"`
			memEntity
			memRelation
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		switch rec.Type {
		case "entity":
			gr.Entities = append(gr.Entities, rec.memEntity)
		case "relation":
			gr.Relations = append(gr.Relations, rec.memRelation)
		default:
			return nil, fmt.Errorf("line %d: type %q, want entity or relation", i+1, rec.Type)
		}
	}
	return gr.items(), nil
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// MemoryWriteItems are the memory items a write to the reference memory
// server stores (tool: create_entities, create_relations or
// add_observations; args: its arguments), each bound to its place: the one
// definition the gateway and the Claude Code hook both match reads by.
func MemoryWriteItems(tool string, args []byte) ([]string, error) { return writeItems(tool, args) }

// MemoryGraphItems are the memory items of a knowledge graph as a read
// returns it in a text block, or false when the text is not exactly one
// graph (a field the items would leave out would reach the model
// unrecorded).
func MemoryGraphItems(text string) ([]string, bool) {
	var gr memGraph
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if dec.Decode(&gr) != nil || dec.More() {
		return nil, false
	}
	return gr.items(), true
}

// writeItems are the memory items a write call stores.
func writeItems(tool string, canon []byte) ([]string, error) {
	switch tool {
	case "create_entities", "create_relations":
		var gr memGraph
		if err := json.Unmarshal(canon, &gr); err != nil {
			return nil, err
		}
		return gr.items(), nil
	case "add_observations":
		var o memObservations
		if err := json.Unmarshal(canon, &o); err != nil {
			return nil, err
		}
		var out []string
		for _, x := range o.Observations {
			for _, c := range x.Contents {
				out = append(out, observationItem(x.EntityName, c))
			}
		}
		return dedupe(out), nil
	}
	return nil, nil
}

// recordWrites records what a write stored: one memory entry per item,
// signed by the agent and derived from the session's context.
func (g *Gateway) recordWrites(ctx context.Context, s *session, tool string, canon []byte) error {
	items, err := writeItems(tool, canon)
	if err != nil {
		return err
	}
	if len(items) > MaxMemoryItems {
		return fmt.Errorf("%d memory items in one call, more than %d", len(items), MaxMemoryItems)
	}
	for _, it := range items {
		if _, err := g.o.Backend.Record(ctx, g.o.Agent, pedigree.Entry{Principal: AgentPrincipal, Kind: lineage.KindMemory,
			Session: s.id, Content: []byte(it), StoreContent: true}); err != nil {
			return err
		}
	}
	return nil
}

// readItems are the memory items a read's result returns. A result the
// gateway cannot read as a knowledge graph is one item, whole.
func readItems(res *mcp.CallToolResult) []string {
	var gr memGraph
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &gr) == nil {
			return gr.items()
		}
	}
	var out []string
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			b, _ := json.Marshal(c)
			out = append(out, string(b))
			continue
		}
		out = append(out, textItems(t.Text)...)
	}
	return dedupe(out)
}

// textItems are the memory items of a text that holds a knowledge graph,
// or the text itself, whole.
func textItems(text string) []string {
	var gr memGraph
	if json.Unmarshal([]byte(text), &gr) == nil {
		return gr.items()
	}
	return []string{text}
}

// attributeRead finds the entries that wrote what a read returns: every
// memory entry of each item's digest is a strong parent of the read's
// output. An item no entry holds is recorded as content of the unverified
// tier, and is that entry from then on.
func (g *Gateway) attributeRead(ctx context.Context, res *mcp.CallToolResult) ([]lineage.Parent, error) {
	return g.attributeItems(ctx, readItems(res))
}

func (g *Gateway) attributeItems(ctx context.Context, items []string) ([]lineage.Parent, error) {
	if len(items) > MaxMemoryItems {
		return nil, fmt.Errorf("%d memory items in one answer, more than %d", len(items), MaxMemoryItems)
	}
	var parents []lineage.Parent
	seen := map[string]bool{}
	for _, it := range items {
		ids, err := g.o.Backend.ByContent(ctx, lineage.DigestContent([]byte(it)))
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			n, err := g.o.Backend.Record(ctx, g.o.Unverified, pedigree.Entry{Principal: UnverifiedPrincipal, Kind: lineage.KindMemory,
				Content: []byte(it), StoreContent: true, Parents: []lineage.Parent{}})
			if err != nil {
				return nil, err
			}
			ids = []string{n.ID}
		}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				parents = append(parents, lineage.Parent{ID: id, Weight: 1})
			}
		}
	}
	if len(parents) >= lineage.MaxParents {
		return nil, fmt.Errorf("the answer holds content of %d memory entries, more than one entry may name", len(parents))
	}
	return parents, nil
}
