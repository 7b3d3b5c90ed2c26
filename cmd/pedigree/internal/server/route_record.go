package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// The recorder's verbs (pedigree.Recorder): entries in and out, on every
// turn of a harness.
var (
	getRegistry   = verb{"GET", "/v1/registry", (*Server).registry}
	getContext    = verb{"GET", "/v1/context/{session}", (*Server).context}
	getContextRef = verb{"GET", "/v1/context-ref/{session}", (*Server).contextRef}
	getResolve    = verb{"GET", "/v1/resolve/{prefix}", (*Server).resolve}
	postEntry     = verb{"POST", "/v1/entries", (*Server).insert}
	getByContent  = verb{"GET", "/v1/content/{digest}", (*Server).byContent}
	getEntry      = verb{"GET", "/v1/entries/{id}", (*Server).show}
	postRecall    = verb{"POST", "/v1/recall", (*Server).recall}
)

func (s *Server) registry(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.e.Registry(r.Context())
	if err != nil {
		return err
	}
	out := registryResponse{Frozen: reg.Frozen, Tau: reg.Tau, Principals: []principalResponse{}, FreezeDigest: reg.FreezeDigest,
		MaxApprovalTTL: reg.MaxApprovalTTL.String(), TrustRoot: reg.TrustRoot}
	if len(reg.OperatorKey) > 0 {
		pemBytes, err := registry.MarshalPublicKey(reg.OperatorKey)
		if err != nil {
			return err
		}
		out.OperatorKey = string(pemBytes)
	}
	for _, p := range reg.Principals {
		pemBytes, err := registry.MarshalPrincipalKey(p.PublicKey)
		if err != nil {
			return err
		}
		out.Principals = append(out.Principals, principalResponse{ID: p.ID, Tier: p.Tier, PublicKey: string(pemBytes), Approver: p.Approver})
	}
	return reply(w, out)
}

// Registry returns the registry as the server has it. Once it is frozen it
// is read from the server once: later calls return a copy of that view.
func (c *Client) Registry(ctx context.Context) (*pedigree.RegistryView, error) {
	c.mu.Lock()
	f := c.frozen
	c.mu.Unlock()
	if f != nil {
		v := *f
		v.Principals = slices.Clone(f.Principals)
		return &v, nil
	}
	v, err := c.readRegistry(ctx)
	if err != nil || !v.Frozen {
		return v, err
	}
	keep := *v
	keep.Principals = slices.Clone(v.Principals)
	c.mu.Lock()
	c.frozen = &keep
	c.mu.Unlock()
	return v, nil
}

func (c *Client) readRegistry(ctx context.Context) (*pedigree.RegistryView, error) {
	var out registryResponse
	if err := c.call(ctx, getRegistry.at(), nil, &out); err != nil {
		return nil, err
	}
	v := &pedigree.RegistryView{Frozen: out.Frozen, Tau: out.Tau, Principals: []registry.Principal{}, FreezeDigest: out.FreezeDigest, TrustRoot: out.TrustRoot}
	if out.OperatorKey != "" {
		k, err := registry.ParsePublicKey([]byte(out.OperatorKey))
		if err != nil {
			return nil, fmt.Errorf("registry: operator key: %w", err)
		}
		v.OperatorKey = k
	}
	if out.MaxApprovalTTL != "" {
		d, err := time.ParseDuration(out.MaxApprovalTTL)
		if err != nil {
			return nil, fmt.Errorf("registry: approval cap %q: %w", out.MaxApprovalTTL, err)
		}
		v.MaxApprovalTTL = d
	}
	for _, p := range out.Principals {
		pub, err := registry.ParsePrincipalKey([]byte(p.PublicKey))
		if err != nil {
			return nil, err
		}
		v.Principals = append(v.Principals, registry.Principal{ID: p.ID, Tier: p.Tier, PublicKey: pub, Approver: p.Approver})
	}
	return v, nil
}

func (s *Server) context(w http.ResponseWriter, r *http.Request) error {
	ids, err := s.e.Context(r.Context(), r.PathValue("session"))
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"ids": nonNil(ids)})
}

// Context is a session's context, as the server has it.
func (c *Client) Context(ctx context.Context, session string) ([]string, error) {
	var out struct{ IDs []string }
	err := c.call(ctx, getContext.at(session), nil, &out)
	return out.IDs, err
}

func (s *Server) contextRef(w http.ResponseWriter, r *http.Request) error {
	session := r.PathValue("session")
	if !lineage.ValidSession(session) {
		return fmt.Errorf("%w: %.64q is not a session a call could name", lineage.ErrMalformed, session)
	}
	ref, err := s.e.ContextRef(r.Context(), session)
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"context": ref})
}

// ContextRef names a session's whole context by reference, as the server
// has it now (nil for an empty context): the client is a
// pedigree.ContextReferrer, so a call whose justification is the default
// names its context by reference, and the server checks the reference
// against its context rows when it stores the call.
func (c *Client) ContextRef(ctx context.Context, session string) (*lineage.ContextRef, error) {
	var out struct{ Context *lineage.ContextRef }
	err := c.call(ctx, getContextRef.at(session), nil, &out)
	return out.Context, err
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) error {
	id, err := s.e.Resolve(r.Context(), r.PathValue("prefix"))
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"id": id})
}

// Resolve turns an ID prefix into a full ID, as the server has it.
func (c *Client) Resolve(ctx context.Context, prefix string) (string, error) {
	var out struct{ ID string }
	err := c.call(ctx, getResolve.at(prefix), nil, &out)
	return out.ID, err
}

func (s *Server) insert(w http.ResponseWriter, r *http.Request) error {
	var req insertRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	start := time.Now()
	n, err := s.e.Insert(r.Context(), req.Envelope, req.Content)
	if err != nil {
		return err
	}
	s.metrics.record.Observe(time.Since(start).Seconds())
	s.metrics.entries.Inc()
	return reply(w, n)
}

// Insert stores an entry signed elsewhere.
func (c *Client) Insert(ctx context.Context, env, content []byte) (*lineage.Node, error) {
	var n lineage.Node
	if err := c.call(ctx, postEntry.at(), insertRequest{Envelope: env, Content: content}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Record builds and signs an entry here and stores it there (Insert).
func (c *Client) Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, error) {
	st, err := pedigree.BuildEntry(ctx, c, en, c.clock())
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, st)
	if err != nil {
		return nil, err
	}
	var content []byte
	if en.StoreContent {
		content = en.Content
		if content == nil {
			content = []byte{}
		}
	}
	return c.Insert(ctx, env, content)
}

func (s *Server) byContent(w http.ResponseWriter, r *http.Request) error {
	ids, err := s.e.ByContent(r.Context(), r.PathValue("digest"))
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"ids": nonNil(ids)})
}

// ByContent returns the memory entries whose content digest is digest.
func (c *Client) ByContent(ctx context.Context, digest string) ([]string, error) {
	var out struct{ IDs []string }
	err := c.call(ctx, getByContent.at(digest), nil, &out)
	return out.IDs, err
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) error {
	v, err := s.e.Show(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, v)
}

// Show returns one entry as stored, with its signature checked again.
func (c *Client) Show(ctx context.Context, id string) (*pedigree.EntryView, error) {
	var v pedigree.EntryView
	if err := c.call(ctx, getEntry.at(id), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Plan reads a stored plan through the server (Show), for BuildCall; the
// gate reads it again from its own store.
func (c *Client) Plan(ctx context.Context, id string) (*lineage.Statement, error) {
	v, err := c.Show(ctx, id)
	if err != nil {
		return nil, err
	}
	st, _, _, err := lineage.Open(v.Envelope)
	return st, err
}

func (s *Server) recall(w http.ResponseWriter, r *http.Request) error {
	var req recallRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.e.Recall(r.Context(), req.Session, req.IDs); err != nil {
		return err
	}
	return reply(w, map[string]any{"recalled": len(req.IDs)})
}

// Recall recalls entries into a session.
func (c *Client) Recall(ctx context.Context, session string, ids []string) error {
	return c.call(ctx, postRecall.at(), recallRequest{Session: session, IDs: ids}, nil)
}
