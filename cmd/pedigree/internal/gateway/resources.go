package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pedigree-ai/pedigree/lineage"
)

// offerExtras mirrors the upstreams' resources, resource templates and
// prompts. What a host reads through them is recorded like a tool's result
// (a retrieval entry of the upstream's tool principal, in the session), so
// reading the memory graph as a resource carries its taint as a read of it
// through a tool does. A resource URI offered by two upstreams is offered
// once, from the first; a prompt name offered by two becomes NAME__PROMPT.
func (g *Gateway) offerExtras(ctx context.Context) {
	uris := map[string]bool{}
	prompts := map[string]int{}
	for _, u := range g.upstreams {
		if caps := u.capabilities(); caps != nil && caps.Prompts != nil {
			for p, err := range u.client.Prompts(ctx, nil) {
				if err != nil {
					g.o.Log.Error("upstream prompts/list", "upstream", u.cfg.Name, "error", err)
					break
				}
				u.prompts = append(u.prompts, p)
				prompts[p.Name]++
			}
		}
	}
	for _, u := range g.upstreams {
		caps := u.capabilities()
		if caps == nil {
			continue
		}
		if caps.Resources != nil {
			for r, err := range u.client.Resources(ctx, nil) {
				if err != nil {
					g.o.Log.Error("upstream resources/list", "upstream", u.cfg.Name, "error", err)
					break
				}
				u.resources = append(u.resources, r)
				if uris[r.URI] {
					continue
				}
				uris[r.URI] = true
				g.owners.resources[r.URI] = u
				g.vouchExtra(itemResource, r.URI, offer(u, itemResource, r.URI, r, r, r.URI))
				g.server.AddResource(r, g.readResource(u))
			}
			for rt, err := range u.client.ResourceTemplates(ctx, nil) {
				if err != nil {
					g.o.Log.Error("upstream resources/templates/list", "upstream", u.cfg.Name, "error", err)
					break
				}
				u.templates = append(u.templates, rt)
				if uris[rt.URITemplate] {
					continue
				}
				uris[rt.URITemplate] = true
				g.owners.templates = append(g.owners.templates, ownedTemplate{rt.URITemplate, u})
				g.vouchExtra(itemTemplate, rt.URITemplate, offer(u, itemTemplate, rt.URITemplate, rt, rt, rt.URITemplate))
				g.server.AddResourceTemplate(rt, g.readResource(u))
			}
		}
		for _, p := range u.prompts {
			e := *p
			if prompts[p.Name] > 1 {
				e.Name = u.cfg.Name + "__" + p.Name
			}
			g.owners.prompts[e.Name] = ownedPrompt{u, p.Name}
			g.vouchExtra(itemPrompt, e.Name, offer(u, itemPrompt, p.Name, p, &e, e.Name))
			g.server.AddPrompt(&e, g.getPrompt(u, p.Name))
		}
	}
}

func (u *upstream) capabilities() *mcp.ServerCapabilities {
	if r := u.client.InitializeResult(); r != nil {
		return r.Capabilities
	}
	return nil
}

// readResource forwards resources/read and records what it returns (or
// the upstream's error) before the host sees it.
func (g *Gateway) readResource(u *upstream) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		s := g.session(req.Session)
		if err := g.settled(s); err != nil {
			return nil, refusedRead(err)
		}
		if err := g.start(ctx, s, req.Session); err != nil {
			return nil, withheld(err)
		}
		res, err := u.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI})
		if err != nil {
			return nil, g.admitFailure(ctx, u, s, err)
		}
		stripKeys(res.Meta)
		parents := []lineage.Parent{}
		if u.cfg.Memory {
			var items []string
			for _, c := range res.Contents {
				items = append(items, textItems(c.Text)...)
			}
			if parents, err = g.attributeItems(ctx, dedupe(items)); err != nil {
				return nil, withheld(err)
			}
		}
		if _, err := g.admit(ctx, admission{up: u, s: s, kind: lineage.KindRetrieval, body: res, parents: parents}); err != nil {
			return nil, withheld(err)
		}
		return res, nil
	}
}

// getPrompt forwards prompts/get and records the messages it returns (or
// the upstream's error).
func (g *Gateway) getPrompt(u *upstream, name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		s := g.session(req.Session)
		if err := g.settled(s); err != nil {
			return nil, refusedRead(err)
		}
		if err := g.start(ctx, s, req.Session); err != nil {
			return nil, withheld(err)
		}
		res, err := u.client.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: req.Params.Arguments})
		if err != nil {
			return nil, g.admitFailure(ctx, u, s, err)
		}
		stripKeys(res.Meta)
		if _, err := g.admit(ctx, admission{up: u, s: s, kind: lineage.KindRetrieval, body: res}); err != nil {
			return nil, withheld(err)
		}
		return res, nil
	}
}

func withheld(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "pedigree: the answer could not be recorded, so it is withheld: " + err.Error()}
}

func refusedRead(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "pedigree: refused: " + err.Error()}
}
