package pedigree

import (
	"context"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Reject records a user's signed rejection of a denied (or ask) decision:
// it leaves the pending list and can no longer be approved.
func (e *Engine) Reject(ctx context.Context, signer *registry.Signer, rejecter, decisionID string) (*lineage.Node, error) {
	d, err := e.gate.Decision(decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(signer, BuildRejection(d, rejecter, e.cfg.clock()))
	if err != nil {
		return nil, err
	}
	return e.gate.Reject(ctx, env)
}

// RejectEnvelope records a rejection signed elsewhere.
func (e *Engine) RejectEnvelope(ctx context.Context, env []byte) (*lineage.Node, error) {
	return e.gate.Reject(ctx, env)
}

// Pending lists the denies and asks a person can still approve or reject,
// newest first, with the evidence.
func (e *Engine) Pending(ctx context.Context) ([]gate.Pending, error) {
	return e.gate.PendingDecisions(ctx)
}

// Reviews lists every approval and rejection of a decision, oldest first.
func (e *Engine) Reviews(ctx context.Context) ([]gate.Review, error) {
	return e.gate.Reviews(ctx)
}

// BuildRejection builds a rejection of decision d by rejecter.
func BuildRejection(d *gate.Decision, rejecter string, now time.Time) *lineage.Statement {
	return &lineage.Statement{
		Version: 1, Principal: rejecter, Kind: lineage.KindRejection, Session: d.Session,
		ContentDigest: lineage.DigestContent([]byte(d.ID)), Parents: []lineage.Parent{}, Time: lineage.FormatTime(now),
		Rejection: &lineage.Rejection{Decision: d.ID, Action: d.ArgsDigest},
	}
}
