package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree/lineage"
)

// Listings are the upstreams' metadata as the host receives it: tools,
// prompts, resources, resource templates. Each item the gateway offers has
// an owner (its upstream) and, when the upstream offers it as the operator
// sealed it ('mcp add' read it into upstreams.json, and the seal covers
// that file), the digest of the form the host receives: vouched for by the
// operator, it records nothing. Every other item (changed since the seal,
// new, or of an upstream added before metadata was sealed) is recorded as
// the owner's content in the session, once, before the listing goes back:
// the session's context then holds what its model was told.

// offered is one item the gateway offers the host.
type offered struct {
	up *upstream
	// item is what the host receives of it.
	item metaItem
	// vouched is the digest of the item as the host receives it when the
	// operator's seal vouches for it, else "".
	vouched string
}

// vouching is what the gateway offers, by kind and the key the host sees.
type vouching struct {
	tools  map[string]offered
	extras map[string]offered // prompts, resources, templates: kind + "\x00" + key
}

func itemDigest(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:]), nil
}

// offer notes an item the gateway offers: exposed is what the host
// receives, now what the upstream said, key the upstream's own key.
func offer(u *upstream, kind, key string, now, exposed any, exposedKey string) offered {
	o := offered{up: u, item: metaItem{kind, exposedKey, exposed}}
	if u.cfg.Metadata.sealedAs(kind, key, now) {
		o.vouched, _ = itemDigest(exposed)
	}
	return o
}

// vouchTools notes the tools the gateway offers now (toolsMu held).
func (g *Gateway) vouchTools(ts []tool) {
	m := map[string]offered{}
	for _, t := range ts {
		var now *mcp.Tool
		for _, x := range t.up.tools {
			if x.Name == t.name {
				now = x
			}
		}
		m[t.exposed.Name] = offer(t.up, itemTool, t.name, now, t.exposed, t.exposed.Name)
	}
	g.vouchMu.Lock()
	g.vouch.tools = m
	g.vouchMu.Unlock()
}

func (g *Gateway) vouchExtra(kind, key string, o offered) {
	g.vouchMu.Lock()
	defer g.vouchMu.Unlock()
	if g.vouch.extras == nil {
		g.vouch.extras = map[string]offered{}
	}
	g.vouch.extras[kind+"\x00"+key] = o
}

func (g *Gateway) offeredItem(kind, key string) (offered, bool) {
	g.vouchMu.Lock()
	defer g.vouchMu.Unlock()
	if kind == itemTool {
		o, ok := g.vouch.tools[key]
		return o, ok
	}
	o, ok := g.vouch.extras[kind+"\x00"+key]
	return o, ok
}

// mediateListings is the server's middleware for listings: what a listing
// holds that the seal does not vouch for is admitted (recorded in the
// session) before the listing goes back, or the listing is refused.
func (g *Gateway) mediateListings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		var items []metaItem
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			for _, t := range r.Tools {
				items = append(items, metaItem{itemTool, t.Name, t})
			}
		case *mcp.ListPromptsResult:
			for _, p := range r.Prompts {
				items = append(items, metaItem{itemPrompt, p.Name, p})
			}
		case *mcp.ListResourcesResult:
			for _, x := range r.Resources {
				items = append(items, metaItem{itemResource, x.URI, x})
			}
		case *mcp.ListResourceTemplatesResult:
			for _, x := range r.ResourceTemplates {
				items = append(items, metaItem{itemTemplate, x.URITemplate, x})
			}
		default:
			return res, nil
		}
		if err := g.admitListed(ctx, req, method, items); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "pedigree: the listing could not be recorded, so it is withheld: " + err.Error()}
		}
		return res, nil
	}
}

// admitListed records each item the seal does not vouch for, once per
// session and form.
func (g *Gateway) admitListed(ctx context.Context, req mcp.Request, method string, items []metaItem) error {
	var s *session
	for _, it := range items {
		o, ok := g.offeredItem(it.kind, it.key)
		if !ok {
			return fmt.Errorf("%s %s has no upstream", it.kind, it.key)
		}
		d, err := itemDigest(it.v)
		if err != nil {
			return err
		}
		if d == o.vouched {
			continue
		}
		if s == nil {
			var ss *mcp.ServerSession
			if ss, s, err = g.hostSession(req); err != nil {
				return err
			}
			if err := g.start(ctx, s, ss); err != nil {
				return err
			}
		}
		if err := g.admitItem(ctx, s, o.up, method, it, d); err != nil {
			return err
		}
	}
	return nil
}

// admitItem records one item of metadata the seal does not vouch for in
// the session, unless this session has it already.
func (g *Gateway) admitItem(ctx context.Context, s *session, u *upstream, method string, it metaItem, digest string) error {
	s.listMu.Lock()
	done := s.listed[digest]
	s.listMu.Unlock()
	if done {
		return nil
	}
	body := map[string]any{"method": method, it.kind: it.v, "note": "not as the operator sealed it"}
	if _, err := g.admit(ctx, admission{up: u, s: s, kind: lineage.KindRetrieval, body: body}); err != nil {
		return err
	}
	s.listMu.Lock()
	if s.listed == nil {
		s.listed = map[string]bool{}
	}
	s.listed[digest] = true
	s.listMu.Unlock()
	return nil
}

// admitUnvouched records, as a session starts, every item the gateway
// offers that the seal does not vouch for: a host may show its model what
// it listed in another session (a cached list), so a session is taken to
// have seen all of it whether it lists or not. Items that change later
// are recorded when the session lists them (mediateListings).
func (g *Gateway) admitUnvouched(ctx context.Context, s *session) error {
	var todo []offered
	g.vouchMu.Lock()
	for _, o := range g.vouch.tools {
		if o.vouched == "" {
			todo = append(todo, o)
		}
	}
	for _, o := range g.vouch.extras {
		if o.vouched == "" {
			todo = append(todo, o)
		}
	}
	g.vouchMu.Unlock()
	sort.Slice(todo, func(i, j int) bool {
		return todo[i].item.kind+"\x00"+todo[i].item.key < todo[j].item.kind+"\x00"+todo[j].item.key
	})
	for _, o := range todo {
		d, err := itemDigest(o.item.v)
		if err != nil {
			return err
		}
		if err := g.admitItem(ctx, s, o.up, listMethod[o.item.kind], o.item, d); err != nil {
			return err
		}
	}
	return nil
}

var listMethod = map[string]string{itemTool: "tools/list", itemPrompt: "prompts/list", itemResource: "resources/list", itemTemplate: "resources/templates/list"}
