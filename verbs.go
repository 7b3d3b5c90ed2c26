package pedigree

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Record signs an entry with signer and stores it.
func (e *Engine) Record(ctx context.Context, signer *registry.Signer, en Entry) (*lineage.Node, error) {
	st, err := e.statement(ctx, en)
	if err != nil {
		return nil, err
	}
	signed, err := lineage.SignStatement(signer, st)
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
	n, err := e.insertSigned(ctx, signed, content)
	if err != nil {
		return nil, e.refused(ctx, err, en.Principal, signed.Envelope())
	}
	return n, nil
}

// insertSigned stores an entry this process signed with
// lineage.SignStatement: instead of decoding the envelope again and
// verifying the signature just made, the graph checks that the signing key
// is the one the frozen registry holds for the principal.
func (e *Engine) insertSigned(ctx context.Context, signed *lineage.Signed, content []byte) (*lineage.Node, error) {
	p, err := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.PrepareSigned(ctx, signed, content) })
	if err != nil {
		return nil, err
	}
	return e.insert(ctx, p)
}

// Insert stores an entry signed elsewhere (the server path: clients sign,
// the engine verifies).
func (e *Engine) Insert(ctx context.Context, env, content []byte) (*lineage.Node, error) {
	p, err := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.Prepare(ctx, env, content) })
	if err != nil {
		return nil, e.refused(ctx, err, claimed(env), env)
	}
	return e.insert(ctx, p)
}

// Recall puts stored entries into a session's context, logs the recall,
// and appends it to the session's trajectory.
func (e *Engine) Recall(ctx context.Context, session string, ids []string) error {
	full := make([]string, 0, len(ids))
	for _, p := range ids {
		id, err := e.Resolve(ctx, p)
		if err != nil {
			return err
		}
		full = append(full, id)
	}
	return e.recall(ctx, &lineage.Recall{Session: session, IDs: full, Time: lineage.FormatTime(e.cfg.clock())})
}

// Resolve turns an ID or a unique prefix into a full entry ID.
func (e *Engine) Resolve(ctx context.Context, prefix string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	id, err := e.graph.Resolve(prefix)
	if e.fleet != nil && errors.Is(err, lineage.ErrUnknownEntry) {
		// Written elsewhere in the fleet, perhaps: wait (bounded) for
		// this node to apply what the stream holds, then look again.
		if werr := e.fleet.n.Barrier(ctx); werr != nil {
			return "", fmt.Errorf("%w (this fleet node has not applied it: %v)", err, werr)
		}
		id, err = e.graph.Resolve(prefix)
	}
	return id, err
}

// Check signs a proposed call with signer and asks the gate. Its call entry
// is recorded; its ID is the parent the tool's output names.
func (e *Engine) Check(ctx context.Context, signer *registry.Signer, c Call) (*gate.Decision, error) {
	d, _, err := e.checkCall(ctx, signer, c, false)
	return d, err
}

// CheckEarly decides on a proposed call as Check does, and returns as soon
// as the decision is made when acting on it early cannot weaken the gate:
// an allow of a tool the catalog says is not sensitive, that used no
// approval. The call entry and the decision are then being committed while
// the caller forwards the call, and stored blocks until they are durable
// and says whether they are: the caller must not hand the tool's result to
// anyone before stored returns nil (the gateway withholds it otherwise). Any
// other decision is durable before CheckEarly returns, and stored is nil. A
// call that may act on the world (sensitive), or that spends a single-use
// approval, is never forwarded before its decision is stored. stored may be
// called any number of times. An early decision is sealed as it is stored:
// read its ID (and InputDigest) only after stored returns.
func (e *Engine) CheckEarly(ctx context.Context, signer *registry.Signer, c Call) (d *gate.Decision, stored func() error, err error) {
	return e.checkCall(ctx, signer, c, true)
}

func (e *Engine) checkCall(ctx context.Context, signer *registry.Signer, c Call, early bool) (*gate.Decision, func() error, error) {
	st, srcs, err := e.callStatement(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	signed, err := lineage.SignStatement(signer, st)
	if err != nil {
		return nil, nil, err
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	p, refused := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.PrepareSigned(ctx, signed, nil) })
	if refused != nil {
		e.logRefusal(ctx, "refused_call", signed.Statement().Principal, refused.Error(), signed.Envelope())
	}
	return e.stage(ctx, p, refused, signed.Statement(), signed.ID(), srcs, early)
}

// checkEnvelope asks the gate about a call entry signed elsewhere (the
// server's clients sign, the engine verifies). argSources are full IDs.
func (e *Engine) checkEnvelope(ctx context.Context, env []byte, argSources map[string][]string) (*gate.Decision, error) {
	p, refused := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.Prepare(ctx, env, nil) })
	if refused != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Decoded apart only to log the deny of a refused call.
		st, _, id, err := lineage.Open(env)
		if err != nil {
			return nil, err
		}
		e.logRefusal(ctx, "refused_call", st.Principal, refused.Error(), env)
		return e.check(ctx, nil, refused, st, id, argSources)
	}
	return e.check(ctx, p, nil, p.Statement, p.Node.ID, argSources)
}

// DefaultApprovalTTL is how long an approval stays usable.
const DefaultApprovalTTL = 15 * time.Minute

// Approve records a user's approval of a denied (or ask) decision: the next
// identical call in that session is allowed once.
// A ttl of 0 means DefaultApprovalTTL; a negative one is refused.
func (e *Engine) Approve(ctx context.Context, signer *registry.Signer, approver, decisionID string, ttl time.Duration) (*lineage.Node, error) {
	if ttl < 0 {
		return nil, fmt.Errorf("%w: the approval's lifetime %s is negative", gate.ErrApproval, ttl)
	}
	if ttl == 0 {
		ttl = DefaultApprovalTTL
	}
	if limit := e.reg.MaxApprovalTTL(); ttl > limit {
		return nil, fmt.Errorf("%w: the approval's lifetime %s is over the cap of %s (set at init)", gate.ErrApproval, ttl, limit)
	}
	d, err := e.Decision(ctx, decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(signer, BuildApproval(d, approver, ttl, e.cfg.clock()))
	if err != nil {
		return nil, err
	}
	return e.approveEnvelope(ctx, env)
}

// approveEnvelope records an approval signed elsewhere.
func (e *Engine) approveEnvelope(ctx context.Context, env []byte) (*lineage.Node, error) {
	n, err := e.approve(ctx, env)
	if err != nil {
		return nil, e.refused(ctx, err, claimed(env), env)
	}
	return n, nil
}

// Trace returns the bounded ancestry of an entry.
func (e *Engine) Trace(ctx context.Context, id string, o lineage.TraceOptions) (*lineage.Trace, error) {
	full, err := e.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.graph.Trace(ctx, full, o)
}

// checkpoint signs the log's current size and root with the operator key
// and stores the checkpoint.
func (e *Engine) checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error) {
	if !operator.Public().Equal(e.reg.OperatorKey()) {
		return nil, fmt.Errorf("%w: not the operator key of this store", registry.ErrBadKey)
	}
	size, root, err := e.log.Head()
	if err != nil {
		return nil, err
	}
	cp, err := tlog.SignCheckpoint(operator, size, root, e.cfg.clock())
	if err != nil {
		return nil, err
	}
	if err := e.addCheckpoint(ctx, cp); err != nil {
		return nil, err
	}
	return e.storedCheckpoint(cp)
}

// storedCheckpoint is the stored checkpoint of cp's size and root.
func (e *Engine) storedCheckpoint(cp *tlog.Checkpoint) (*tlog.Checkpoint, error) {
	cps, err := e.log.Checkpoints()
	if err != nil {
		return nil, err
	}
	for i := range cps {
		if cps[i].Size == cp.Size && cps[i].Root == cp.Root {
			return &cps[i], nil
		}
	}
	return nil, fmt.Errorf("checkpoint %d: %w", cp.Size, tlog.ErrNoCheckpoint)
}

// Registry is the principal registry.
func (e *Engine) Registry(ctx context.Context) (*RegistryView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	digest, err := e.reg.FreezeDigest()
	if err != nil {
		return nil, err
	}
	return &RegistryView{Frozen: e.reg.Frozen(), Tau: e.reg.Tau(), Principals: e.reg.List(), FreezeDigest: digest, OperatorKey: e.reg.OperatorKey(),
		MaxApprovalTTL: e.reg.MaxApprovalTTL(), TrustRoot: e.TrustRoot()}, nil
}

// ByContent returns the memory entries whose signed content digest is
// digest ("sha256:<hex>"): how the MCP gateway matches a memory server's
// answer back to the entries that wrote it.
func (e *Engine) ByContent(ctx context.Context, digest string) ([]string, error) {
	return e.graph.ByContent(ctx, digest)
}

// Context is a session's context: every entry recorded in it or recalled
// into it, in order.
func (e *Engine) Context(ctx context.Context, session string) ([]string, error) {
	return e.graph.Context(ctx, session)
}

// ContextRef names a session's whole context by reference: its count and
// the hash chain over it (nil for an empty context). With it the engine is
// a ContextReferrer: a call it builds with the default justification names
// its context so, in O(arguments), and never needs the session's context
// rolled up to stay within lineage.MaxParents.
func (e *Engine) ContextRef(ctx context.Context, session string) (*lineage.ContextRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.graph.ContextRef(session)
}

// Decision is a logged decision, by ID or unique prefix.
func (e *Engine) Decision(ctx context.Context, id string) (*gate.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := e.decisions.Record(id)
	if err != nil {
		return nil, err
	}
	return &r.Decision, nil
}

// Decisions lists logged decisions, oldest first.
func (e *Engine) Decisions(ctx context.Context, q DecisionQuery) ([]gate.Decision, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("%w: a negative decision limit", lineage.ErrMalformed)
	}
	return e.decisions.Decisions(ctx, q.Limit, q.Session)
}

// Show is one entry as stored, with its signature checked again.
func (e *Engine) Show(ctx context.Context, prefix string) (*EntryView, error) {
	id, err := e.Resolve(ctx, prefix)
	if err != nil {
		return nil, err
	}
	n, err := e.graph.Node(id)
	if err != nil {
		return nil, err
	}
	env, content, err := e.graph.Envelope(id)
	if err != nil {
		return nil, err
	}
	// Every parent edge: a context reference's entries too, read from the
	// context rows and checked against the reference.
	edges, err := e.graph.Edges(n)
	if err != nil {
		return nil, err
	}
	v := &EntryView{Node: n, Parents: edges, Envelope: env, Content: content}
	if err := e.graph.VerifyEntrySignature(env); err != nil {
		v.SignatureError = err.Error()
	}
	return v, nil
}

// Trajectory is a session's trajectory, with its calls and alerts.
func (e *Engine) Trajectory(ctx context.Context, session string) (*trajectory.State, error) {
	return e.decisions.Trajectory(ctx, session)
}

// logHead is the log's current size and root (hex).
func (e *Engine) logHead(ctx context.Context) (uint64, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	return e.log.Head()
}

// addCheckpoint stores a checkpoint signed elsewhere, after checking the
// operator's signature and that its root is the log's at its size. Stored
// checkpoints are never overwritten: when one of the same size and root is
// stored, that one stays and this is not an error.
func (e *Engine) addCheckpoint(ctx context.Context, cp *tlog.Checkpoint) error {
	err := e.log.AddCheckpoint(ctx, cp)
	if !errors.Is(err, tlog.ErrCheckpointExists) {
		return err
	}
	if _, serr := e.storedCheckpoint(cp); serr != nil {
		return err
	}
	return nil
}

// prove is an inclusion proof of an entry (by ID or prefix), else of a
// decision, against the checkpoint of size (0: the latest), verified.
func (e *Engine) prove(ctx context.Context, idOrPrefix string, size uint64) (*tlog.InclusionProof, error) {
	id, err := e.Resolve(ctx, idOrPrefix)
	if err != nil {
		d, derr := e.Decision(ctx, idOrPrefix)
		if derr != nil {
			return nil, err
		}
		id = d.ID
	}
	return e.log.Prove(id, size)
}

// consistency is a consistency proof between two checkpoints, verified.
func (e *Engine) consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.log.Consistency(oldSize, newSize)
}

// proveAgainst proves an entry (by ID or prefix) or else a decision
// against a checkpoint kept elsewhere, after checking that the store
// extends it (tlog.ErrNotExtension when not).
func (e *Engine) proveAgainst(ctx context.Context, idOrPrefix string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := e.logID(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	return e.log.ProveAgainst(id, cp)
}

// consistencyFrom proves that the store's log extends a checkpoint kept
// elsewhere, up to the stored checkpoint of newSize (0: the current head).
func (e *Engine) consistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.log.ConsistencyFrom(old, newSize)
}

// logID resolves an entry prefix, else a decision ID or prefix.
func (e *Engine) logID(ctx context.Context, idOrPrefix string) (string, error) {
	id, err := e.Resolve(ctx, idOrPrefix)
	if err != nil {
		d, derr := e.Decision(ctx, idOrPrefix)
		if derr != nil {
			return "", err
		}
		id = d.ID
	}
	return id, nil
}
