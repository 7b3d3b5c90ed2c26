package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// The checker's verbs (pedigree.Checker: a call asked about, its decision
// read back) and the reviewer's (pedigree.Reviewer: a person's approve and
// reject, and what waits for one).
var (
	postCheck     = verb{"POST", "/v1/check", (*Server).check}
	getDecisions  = verb{"GET", "/v1/decisions", (*Server).decisions}
	getDecision   = verb{"GET", "/v1/decisions/{id}", (*Server).decision}
	getSubject    = verb{"GET", "/v1/decisions/{id}/subject", (*Server).subject}
	postApproval  = verb{"POST", "/v1/approvals", (*Server).approve}
	postRejection = verb{"POST", "/v1/rejections", (*Server).reject}
	getPending    = verb{"GET", "/v1/pending", (*Server).pending}
	getReviews    = verb{"GET", "/v1/reviews", (*Server).reviews}
)

func (s *Server) check(w http.ResponseWriter, r *http.Request) error {
	var req checkRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	start := time.Now()
	d, err := s.e.Envelopes().Check(r.Context(), req.Call, req.ArgSources)
	if err != nil {
		return err
	}
	s.metrics.check.Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues(string(d.Decision)).Inc()
	return reply(w, d)
}

// Check builds and signs the call here and asks the server's gate.
func (c *Client) Check(ctx context.Context, s *registry.Signer, call pedigree.Call) (*gate.Decision, error) {
	st, srcs, err := pedigree.BuildCall(ctx, c, call, c.clock())
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, st)
	if err != nil {
		return nil, err
	}
	var d gate.Decision
	if err := c.call(ctx, postCheck.at(), checkRequest{Call: env, ArgSources: srcs}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (s *Server) decisions(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit")
	if err != nil {
		return err
	}
	ds, err := s.e.Decisions(r.Context(), pedigree.DecisionQuery{Limit: limit, Session: r.URL.Query().Get("session")})
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"decisions": nonNil(ds)})
}

// Decisions lists the decision log.
func (c *Client) Decisions(ctx context.Context, q pedigree.DecisionQuery) ([]gate.Decision, error) {
	var out struct{ Decisions []gate.Decision }
	query := url.Values{"limit": {strconv.Itoa(q.Limit)}}
	if q.Session != "" {
		query.Set("session", q.Session)
	}
	err := c.call(ctx, getDecisions.at().with(query), nil, &out)
	return out.Decisions, err
}

func (s *Server) decision(w http.ResponseWriter, r *http.Request) error {
	d, err := s.e.Decision(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, d)
}

// Decision returns a logged decision.
func (c *Client) Decision(ctx context.Context, id string) (*gate.Decision, error) {
	var d gate.Decision
	if err := c.call(ctx, getDecision.at(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (s *Server) subject(w http.ResponseWriter, r *http.Request) error {
	p, err := s.e.Subject(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, p)
}

// Subject is one logged decision as a person reviews it.
func (c *Client) Subject(ctx context.Context, decisionID string) (*gate.Pending, error) {
	var p gate.Pending
	if err := c.call(ctx, getSubject.at(decisionID), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) error {
	var req approveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	n, err := s.e.Envelopes().Approve(r.Context(), req.Envelope)
	if err != nil {
		return err
	}
	return reply(w, n)
}

// Approve builds and signs the approval here.
func (c *Client) Approve(ctx context.Context, s *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error) {
	if ttl < 0 {
		return nil, fmt.Errorf("%w: the approval's lifetime %s is negative", gate.ErrApproval, ttl)
	}
	if ttl == 0 {
		ttl = pedigree.DefaultApprovalTTL
	}
	d, err := c.Decision(ctx, decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, pedigree.BuildApproval(d, approver, ttl, c.clock()))
	if err != nil {
		return nil, err
	}
	var n lineage.Node
	if err := c.call(ctx, postApproval.at(), approveRequest{Envelope: env}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request) error {
	var req approveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	n, err := s.e.Envelopes().Reject(r.Context(), req.Envelope)
	if err != nil {
		return err
	}
	return reply(w, n)
}

// Reject builds and signs the rejection here.
func (c *Client) Reject(ctx context.Context, s *registry.Signer, rejecter, decisionID string) (*lineage.Node, error) {
	d, err := c.Decision(ctx, decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(s, pedigree.BuildRejection(d, rejecter, c.clock()))
	if err != nil {
		return nil, err
	}
	var n lineage.Node
	if err := c.call(ctx, postRejection.at(), approveRequest{Envelope: env}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.e.Pending(r.Context())
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"pending": nonNil(ps)})
}

// Pending lists the decisions a person can still approve or reject.
func (c *Client) Pending(ctx context.Context) ([]gate.Pending, error) {
	var out struct{ Pending []gate.Pending }
	err := c.call(ctx, getPending.at(), nil, &out)
	return out.Pending, err
}

func (s *Server) reviews(w http.ResponseWriter, r *http.Request) error {
	rs, err := s.e.Reviews(r.Context())
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"reviews": nonNil(rs)})
}

// Reviews lists approvals and rejections of decisions.
func (c *Client) Reviews(ctx context.Context) ([]gate.Review, error) {
	var out struct{ Reviews []gate.Review }
	err := c.call(ctx, getReviews.at(), nil, &out)
	return out.Reviews, err
}
