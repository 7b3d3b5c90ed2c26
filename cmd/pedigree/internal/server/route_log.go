package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// The log's verbs (pedigree.Prover): its head, checkpoints and proofs. The
// client verifies every proof here, against the checkpoint it holds.
var (
	getLogHead           = verb{"GET", "/v1/log/head", (*Server).logHead}
	postCheckpoint       = verb{"POST", "/v1/log/checkpoints", (*Server).addCheckpoint}
	getInclusion         = verb{"GET", "/v1/log/prove/{id}", (*Server).prove}
	getConsistency       = verb{"GET", "/v1/log/consistency", (*Server).consistency}
	postInclusionAgainst = verb{"POST", "/v1/log/prove-against", (*Server).proveAgainst}
	postConsistencyFrom  = verb{"POST", "/v1/log/consistency-from", (*Server).consistencyFrom}
)

func (s *Server) logHead(w http.ResponseWriter, r *http.Request) error {
	size, root, err := s.e.Log().Head(r.Context())
	if err != nil {
		return err
	}
	return reply(w, headResponse{Size: size, Root: root})
}

func (s *Server) addCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req checkpointRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.e.Log().AddCheckpoint(r.Context(), &req.Checkpoint); err != nil {
		return err
	}
	return reply(w, req.Checkpoint)
}

// Head is the server's log head: its size and root, unsigned.
func (c *Client) Head(ctx context.Context) (uint64, string, error) {
	var head headResponse
	err := c.call(ctx, getLogHead.at(), nil, &head)
	return head.Size, head.Root, err
}

// Checkpoint signs the server's log head here with the operator key, and
// stores it there.
func (c *Client) Checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error) {
	size, root, err := c.Head(ctx)
	if err != nil {
		return nil, err
	}
	cp, err := tlog.SignCheckpoint(operator, size, root, c.clock())
	if err != nil {
		return nil, err
	}
	var stored tlog.Checkpoint
	if err := c.call(ctx, postCheckpoint.at(), checkpointRequest{Checkpoint: *cp}, &stored); err != nil {
		return nil, err
	}
	return &stored, nil
}

func (s *Server) prove(w http.ResponseWriter, r *http.Request) error {
	size, err := intParam(r, "checkpoint")
	if err != nil {
		return err
	}
	p, err := s.e.Log().Prove(r.Context(), r.PathValue("id"), uint64(size))
	if err != nil {
		return err
	}
	return reply(w, p)
}

// Prove returns a verified inclusion proof (verified again here).
func (c *Client) Prove(ctx context.Context, id string, size uint64) (*tlog.InclusionProof, error) {
	var p tlog.InclusionProof
	q := url.Values{"checkpoint": {strconv.FormatUint(size, 10)}}
	if err := c.call(ctx, getInclusion.at(id).with(q), nil, &p); err != nil {
		return nil, err
	}
	return &p, p.Verify()
}

func (s *Server) consistency(w http.ResponseWriter, r *http.Request) error {
	o, err := intParam(r, "old")
	if err != nil {
		return err
	}
	n, err := intParam(r, "new")
	if err != nil {
		return err
	}
	p, err := s.e.Log().Consistency(r.Context(), uint64(o), uint64(n))
	if err != nil {
		return err
	}
	return reply(w, p)
}

// Consistency returns a verified consistency proof (verified again here).
func (c *Client) Consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error) {
	var p tlog.ConsistencyProof
	q := url.Values{"old": {strconv.FormatUint(oldSize, 10)}, "new": {strconv.FormatUint(newSize, 10)}}
	if err := c.call(ctx, getConsistency.at().with(q), nil, &p); err != nil {
		return nil, err
	}
	return &p, p.Verify()
}

func (s *Server) proveAgainst(w http.ResponseWriter, r *http.Request) error {
	var req proveAgainstRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := s.e.Log().ProveAgainst(r.Context(), req.ID, &req.Checkpoint)
	if err != nil {
		return err
	}
	return reply(w, p)
}

// ProveAgainst returns an inclusion proof against a checkpoint kept
// elsewhere, verified here against that checkpoint, not the server's copy.
func (c *Client) ProveAgainst(ctx context.Context, id string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error) {
	var p tlog.InclusionProof
	if err := c.call(ctx, postInclusionAgainst.at(), proveAgainstRequest{ID: id, Checkpoint: *cp}, &p); err != nil {
		return nil, err
	}
	p.Checkpoint = *cp
	if err := p.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", tlog.ErrNotExtension, err)
	}
	return &p, nil
}

func (s *Server) consistencyFrom(w http.ResponseWriter, r *http.Request) error {
	var req consistencyFromRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := s.e.Log().ConsistencyFrom(r.Context(), &req.Checkpoint, req.New)
	if err != nil {
		return err
	}
	return reply(w, p)
}

// ConsistencyFrom returns a consistency proof from a checkpoint kept
// elsewhere, verified here against that checkpoint.
func (c *Client) ConsistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error) {
	var p tlog.ConsistencyProof
	if err := c.call(ctx, postConsistencyFrom.at(), consistencyFromRequest{Checkpoint: *old, New: newSize}, &p); err != nil {
		return nil, err
	}
	p.Old = *old
	if err := p.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", tlog.ErrNotExtension, err)
	}
	return &p, nil
}

// VerifyCheckpoints asks the server to verify its store (postVerify), and
// that it extends each of cps (checkpoints kept elsewhere).
func (c *Client) VerifyCheckpoints(ctx context.Context, cps []tlog.Checkpoint) (*lineage.Report, error) {
	var r lineage.Report
	if err := c.call(ctx, postVerify.at(), verifyRequest{Checkpoints: cps}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
