package server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// The auditor's verbs (pedigree.Auditor): what explains and checks after the
// fact.
var (
	getTrace        = verb{"GET", "/v1/trace/{id}", (*Server).trace}
	postVerify      = verb{"POST", "/v1/verify", (*Server).verify}
	getReevaluation = verb{"GET", "/v1/decisions/{id}/reevaluate", (*Server).reevaluate}
	getTrajectory   = verb{"GET", "/v1/trajectory/{session}", (*Server).trajectory}
	getRefusals     = verb{"GET", "/v1/refusals", (*Server).refusals}
)

func (s *Server) trace(w http.ResponseWriter, r *http.Request) error {
	depth, err := intParam(r, "max_depth")
	if err != nil {
		return err
	}
	nodes, err := intParam(r, "max_nodes")
	if err != nil {
		return err
	}
	tr, err := s.e.Trace(r.Context(), r.PathValue("id"), lineage.TraceOptions{MaxDepth: depth, MaxNodes: nodes})
	if err != nil {
		return err
	}
	return reply(w, traceResponse{Root: tr.Root, Nodes: nonNil(tr.Nodes), Edges: nonNil(tr.Edges), Untrusted: nonNil(tr.Untrusted), Truncated: tr.Truncated})
}

// Trace returns an entry's bounded ancestry.
func (c *Client) Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error) {
	var tr traceResponse
	q := url.Values{"max_depth": {strconv.Itoa(o.MaxDepth)}, "max_nodes": {strconv.Itoa(o.MaxNodes)}}
	if err := c.call(ctx, getTrace.at(id).with(q), nil, &tr); err != nil {
		return nil, err
	}
	return &lineage.Trace{Root: tr.Root, Nodes: tr.Nodes, Edges: tr.Edges, Untrusted: tr.Untrusted, Truncated: tr.Truncated}, nil
}

// verify verifies the store, and that it extends each checkpoint the
// request names (Client.Verify names none, Client.VerifyCheckpoints some).
func (s *Server) verify(w http.ResponseWriter, r *http.Request) error {
	var req verifyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	// Verifying a large store takes longer than a write timeout.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	rep, err := s.e.Log().VerifyCheckpoints(r.Context(), req.Checkpoints)
	if err != nil {
		return err
	}
	return reply(w, rep)
}

// Verify asks the server to verify its store.
func (c *Client) Verify(ctx context.Context) (*lineage.Report, error) {
	var r lineage.Report
	if err := c.call(ctx, postVerify.at(), struct{}{}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *Server) reevaluate(w http.ResponseWriter, r *http.Request) error {
	re, err := s.e.Reevaluate(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, re)
}

// Reevaluate asks the server to evaluate a logged decision again.
func (c *Client) Reevaluate(ctx context.Context, decisionID string) (*pedigree.Reevaluation, error) {
	var re pedigree.Reevaluation
	if err := c.call(ctx, getReevaluation.at(decisionID), nil, &re); err != nil {
		return nil, err
	}
	return &re, nil
}

func (s *Server) trajectory(w http.ResponseWriter, r *http.Request) error {
	st, err := s.e.Trajectory(r.Context(), r.PathValue("session"))
	if err != nil {
		return err
	}
	return reply(w, trajectoryResponse{State: *st, Calls: nonNil(st.Calls), Alerts: nonNil(st.Alerts)})
}

// Trajectory returns a session's trajectory with its calls and alerts.
func (c *Client) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	var out trajectoryResponse
	if err := c.call(ctx, getTrajectory.at(session), nil, &out); err != nil {
		return nil, err
	}
	st := out.State
	st.Calls, st.Alerts = out.Calls, out.Alerts
	return &st, nil
}

func (s *Server) refusals(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit")
	if err != nil {
		return err
	}
	rs, err := s.e.Refusals(r.Context(), limit)
	if err != nil {
		return err
	}
	return reply(w, refusalsResponse{Refusals: rs})
}

// Refusals lists the server's refusal log, oldest first (limit > 0: the
// last limit).
func (c *Client) Refusals(ctx context.Context, limit int) ([]pedigree.Refusal, error) {
	var out refusalsResponse
	if err := c.call(ctx, getRefusals.at().with(url.Values{"limit": {strconv.Itoa(limit)}}), nil, &out); err != nil {
		return nil, err
	}
	if out.Refusals == nil {
		out.Refusals = []pedigree.Refusal{}
	}
	return out.Refusals, nil
}
