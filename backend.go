package pedigree

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Backend is every verb of a data directory a harness or the command uses,
// the same whether the directory is opened in this process (*Engine) or
// reached through a running sidecar server (the server package's Client),
// so that output and errors do not depend on which one is held. It is made
// of role interfaces; an adapter asks for the roles it uses (the MCP gateway
// and the Claude Code hooks: Harness).
//
// Adding a verb means a method on *Engine, a line in its role here, and its
// route on the sidecar server (one declaration there: the route, its handler
// and the server's Client method side by side); the compile-time assertions
// in both packages keep them in step, and a client refuses a server that
// lacks a route it calls.
type Backend interface {
	Harness
	Auditor
	// Close releases the backend.
	Close() error
}

// Harness is what an agent's harness needs: the MCP gateway and the Claude
// Code hooks record, check, and ask a person.
type Harness interface {
	Recorder
	Checker
	Reviewer
}

// Recorder puts signed entries into a data directory and reads them back:
// what every harness (the MCP gateway, the Claude Code hooks) does on every
// turn.
type Recorder interface {
	// Registry is the principal registry as the directory holds it.
	Registry(ctx context.Context) (*RegistryView, error)
	// Resolve turns an ID or a unique prefix of at least
	// lineage.MinPrefix hex characters into a full entry ID.
	Resolve(ctx context.Context, prefix string) (string, error)
	// Context is a session's context: every entry recorded in it or
	// recalled into it, in order.
	Context(ctx context.Context, session string) ([]string, error)
	// Record builds an entry's statement, signs it with s and stores it. The
	// node's Edges(tau) are its parent edges.
	Record(ctx context.Context, s *registry.Signer, en Entry) (*lineage.Node, error)
	// Insert stores an entry signed elsewhere, after verifying it.
	Insert(ctx context.Context, env, content []byte) (*lineage.Node, error)
	// ByContent lists the memory entries whose signed content digest is
	// digest ("sha256:<hex>"), at most lineage.MaxByContent.
	ByContent(ctx context.Context, digest string) ([]string, error)
	// Recall puts stored entries into a session's context.
	Recall(ctx context.Context, session string, ids []string) error
	// Show is one entry as stored, with its signature checked again.
	Show(ctx context.Context, id string) (*EntryView, error)
}

// Checker asks the gate about a proposed call, and reads back what it
// decided and how a person is shown it.
type Checker interface {
	// Check signs a proposed call with s and asks the gate.
	Check(ctx context.Context, s *registry.Signer, c Call) (*gate.Decision, error)
	// Decision is a logged decision, by ID or unique prefix.
	Decision(ctx context.Context, id string) (*gate.Decision, error)
	// Decisions lists logged decisions, oldest first.
	Decisions(ctx context.Context, q DecisionQuery) ([]gate.Decision, error)
	// Subject is one logged decision (ID or unique prefix) as a person
	// reviews it: the exact call, each argument's sources and rule.
	Subject(ctx context.Context, decisionID string) (*gate.Pending, error)
}

// Reviewer is a person's side of a decision: approving or rejecting it,
// and what is waiting for one.
type Reviewer interface {
	// Approve signs an approval of a logged decision, usable once within ttl
	// (0: DefaultApprovalTTL), and records it.
	Approve(ctx context.Context, s *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error)
	// Reject signs a rejection of a logged decision and records it: the
	// decision can no longer be approved.
	Reject(ctx context.Context, s *registry.Signer, rejecter, decisionID string) (*lineage.Node, error)
	// Pending lists denies and asks nobody has approved or rejected, newest
	// first, with where each argument came from.
	Pending(ctx context.Context) ([]gate.Pending, error)
	// Reviews lists approvals and rejections of decisions, oldest first.
	Reviews(ctx context.Context) ([]gate.Review, error)
}

// Auditor explains and checks after the fact: the ancestry behind an entry,
// the whole store, a decision evaluated again, a session's trajectory, the
// writes that were refused.
type Auditor interface {
	// Trace is the bounded ancestry of an entry.
	Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error)
	// Verify checks the whole store.
	Verify(ctx context.Context) (*lineage.Report, error)
	// Reevaluate evaluates a logged decision again, on its logged input, at
	// its logged time, and says whether the policy version or the outcome
	// changed.
	Reevaluate(ctx context.Context, decisionID string) (*Reevaluation, error)
	// Trajectory is a session's trajectory, with its calls and alerts.
	Trajectory(ctx context.Context, session string) (*trajectory.State, error)
	// Refusals is the refusal log: writes refused as attempts, oldest first
	// (limit > 0: the last limit).
	Refusals(ctx context.Context, limit int) ([]Refusal, error)
}

// Prover is the log's proofs and checkpoints: an engine's Log, or a sidecar
// server's client. It is not part of Backend: only the log verbs use it.
type Prover interface {
	// Head is the log's size and root now, unsigned.
	Head(ctx context.Context) (size uint64, root string, err error)
	// Checkpoint signs the log's head with the operator key and stores it.
	Checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error)
	// Prove is an inclusion proof of an entry or decision, verified.
	Prove(ctx context.Context, id string, size uint64) (*tlog.InclusionProof, error)
	// Consistency is a consistency proof between two checkpoints, verified.
	Consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error)
	// VerifyCheckpoints is Verify, and checks that the store extends each
	// checkpoint kept elsewhere.
	VerifyCheckpoints(ctx context.Context, cps []tlog.Checkpoint) (*lineage.Report, error)
	// ProveAgainst is an inclusion proof against a checkpoint kept
	// elsewhere (tlog.ErrNotExtension when the store does not extend it).
	ProveAgainst(ctx context.Context, id string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error)
	// ConsistencyFrom proves the store's log extends a checkpoint kept
	// elsewhere, up to the stored checkpoint of newSize (0: the head).
	ConsistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error)
}

var _ Backend = (*Engine)(nil)

// RegistryView is the registry as a backend reports it.
type RegistryView struct {
	Frozen     bool
	Tau        float64
	Principals []registry.Principal // in ID order
	// OperatorKey is the operator's public key as the store holds it.
	OperatorKey ed25519.PublicKey
	// FreezeDigest is the sha256 of the freeze record ("" before freeze):
	// pinned outside the directory, a trust root.
	FreezeDigest string
	// MaxApprovalTTL caps every approval's lifetime.
	MaxApprovalTTL time.Duration
	// TrustRoot is how the store is anchored (TrustRootKey, TrustRootDigest
	// or TrustRootNone).
	TrustRoot string
}

// Lookup finds a principal by ID.
func (v *RegistryView) Lookup(id string) (registry.Principal, bool) {
	for _, p := range v.Principals {
		if p.ID == id {
			return p, true
		}
	}
	return registry.Principal{}, false
}

// DecisionQuery selects logged decisions.
type DecisionQuery struct {
	// Limit keeps only the last Limit decisions that match (0: all).
	Limit int
	// Session, when set, keeps only that session's decisions.
	Session string
}

// EntryView is one entry as stored: its node (principal, labels), its
// parent edges, the signed envelope, the content when it was stored, and the
// result of checking the envelope's signature again.
type EntryView struct {
	Node           *lineage.Node  `json:"node"`
	Parents        []lineage.Edge `json:"parents"`
	Envelope       []byte         `json:"envelope"`
	Content        []byte         `json:"content,omitempty"`
	SignatureError string         `json:"signature_error,omitempty"`
}
