package pedigree

import (
	"context"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// The engine's verbs a harness calls every turn (record, recall, check,
// approve, show, trace, verify) are methods of Engine. What an operator or a
// remote signer does now and then is behind four small views, so that Engine
// reads in one screen: its log's proofs and checkpoints (Log), its place in a
// fleet (Fleet), the registry before freeze (Bootstrap), and statements
// signed by a caller that holds its own key (Envelopes). A view holds nothing
// of its own; it is valid as long as its engine is open.

// Log is the view of an engine's tamper-evident log: its head, checkpoints
// signed here or kept elsewhere, inclusion and consistency proofs, and the
// witnesses it hands checkpoints to.
type Log struct{ e *Engine }

// Log is the engine's log.
func (e *Engine) Log() *Log { return &Log{e} }

// Head is the log's current size and root (hex).
func (l *Log) Head(ctx context.Context) (uint64, string, error) { return l.e.logHead(ctx) }

// Checkpoint signs the log's current size and root with the operator key
// and stores it.
func (l *Log) Checkpoint(ctx context.Context, operator *registry.Signer) (*tlog.Checkpoint, error) {
	return l.e.checkpoint(ctx, operator)
}

// AddCheckpoint stores a checkpoint signed elsewhere, after checking the
// operator's signature and that the log extends it.
func (l *Log) AddCheckpoint(ctx context.Context, cp *tlog.Checkpoint) error {
	return l.e.addCheckpoint(ctx, cp)
}

// Prove is an inclusion proof of an entry (by ID or prefix), else of a
// decision, in the log at size (0: the head), verified.
func (l *Log) Prove(ctx context.Context, idOrPrefix string, size uint64) (*tlog.InclusionProof, error) {
	return l.e.prove(ctx, idOrPrefix, size)
}

// Consistency is a consistency proof between two checkpoints, verified.
func (l *Log) Consistency(ctx context.Context, oldSize, newSize uint64) (*tlog.ConsistencyProof, error) {
	return l.e.consistency(ctx, oldSize, newSize)
}

// ProveAgainst proves an entry (by ID or prefix) or else a decision against
// a checkpoint kept elsewhere (tlog.ErrNotExtension when the store does not
// extend it).
func (l *Log) ProveAgainst(ctx context.Context, idOrPrefix string, cp *tlog.Checkpoint) (*tlog.InclusionProof, error) {
	return l.e.proveAgainst(ctx, idOrPrefix, cp)
}

// ConsistencyFrom proves that the store's log extends a checkpoint kept
// elsewhere, up to the stored checkpoint of newSize (0: the head).
func (l *Log) ConsistencyFrom(ctx context.Context, old *tlog.Checkpoint, newSize uint64) (*tlog.ConsistencyProof, error) {
	return l.e.consistencyFrom(ctx, old, newSize)
}

// VerifyCheckpoints is Engine.Verify, and checks that the store extends
// each checkpoint kept elsewhere.
func (l *Log) VerifyCheckpoints(ctx context.Context, cps []tlog.Checkpoint) (*lineage.Report, error) {
	return l.e.verifyCheckpoints(ctx, cps)
}

// Witness signs the log's head with the engine key and hands it to every
// witness, each of which keeps it only if it extends what it holds.
func (l *Log) Witness(ctx context.Context) error { return l.e.witness(ctx) }

// Fleet is the view of an engine's place in a fleet (see WithFleet). On a
// local engine Status says false, Refusals is empty and Sync returns at once.
type Fleet struct{ e *Engine }

// Fleet is the engine's place in its fleet.
func (e *Engine) Fleet() *Fleet { return &Fleet{e} }

// Status is this node's place in the fleet's stream; false on an engine that
// is not a fleet node.
func (f *Fleet) Status() (FleetStatus, bool) { return f.e.fleetStatus() }

// Refusals are the records this node refused (the latest 1000).
func (f *Fleet) Refusals() []FleetRefusal { return f.e.fleetRefusals() }

// Sync waits, bounded by ctx, until this node has applied every record the
// stream held when it was called. It fails with an error wrapping
// ErrFleetRewritten when the node stopped at a rewritten stream, or the
// stream ends before what the node's witness saw.
func (f *Fleet) Sync(ctx context.Context) error { return f.e.fleetSync(ctx) }

// Checkpoint publishes this node's checkpoint of the fleet's stream up to
// the last record it applied, and waits until it has applied and witnessed
// it (nodes do so on their own: see WithCheckpointEvery).
func (f *Fleet) Checkpoint(ctx context.Context) error { return f.e.fleetCheckpoint(ctx) }

// Genesis is the frozen registry as the record that starts a fleet's stream.
func (f *Fleet) Genesis() ([]byte, error) { return f.e.genesis() }

// Bootstrap is the view of an engine's registry before freeze: principals
// are added, then the operator freezes it, once.
type Bootstrap struct{ e *Engine }

// Bootstrap is the engine's registry before freeze.
func (e *Engine) Bootstrap() *Bootstrap { return &Bootstrap{e} }

// AddPrincipal registers a principal; ErrFrozen after freeze.
func (b *Bootstrap) AddPrincipal(ctx context.Context, p registry.Principal) error {
	return b.e.addPrincipal(ctx, p)
}

// Freeze freezes the registry with the operator key, keeps a copy of the
// signed freeze record beside the store (registry.freeze), and seals the
// configuration the directory holds (SealFile).
func (b *Bootstrap) Freeze(ctx context.Context, operator *registry.Signer) error {
	return b.e.freeze(ctx, operator)
}

// Envelopes is the view for statements signed elsewhere, by a caller that
// holds its own key (the sidecar server's clients, a tool wrapper): the
// engine builds the statement, the caller signs it, and hands the envelope
// back, which the engine verifies against the frozen registry as it stores
// or decides on it.
type Envelopes struct{ e *Engine }

// Envelopes is the engine's view for statements signed elsewhere.
func (e *Engine) Envelopes() *Envelopes { return &Envelopes{e} }

// Statement builds the statement for an entry, filling in the default
// parents from the session's context.
func (v *Envelopes) Statement(ctx context.Context, en Entry) (*lineage.Statement, error) {
	return v.e.statement(ctx, en)
}

// CallStatement builds the statement of a proposed call, to be signed by
// the caller, and the argument sources it names.
func (v *Envelopes) CallStatement(ctx context.Context, c Call) (*lineage.Statement, map[string][]string, error) {
	return v.e.callStatement(ctx, c)
}

// InsertSigned stores an entry this process signed with
// lineage.SignStatement: instead of decoding the envelope again and
// verifying the signature just made, the graph checks that the signing key
// is the one the frozen registry holds for the principal.
func (v *Envelopes) InsertSigned(ctx context.Context, signed *lineage.Signed, content []byte) (*lineage.Node, error) {
	return v.e.insertSigned(ctx, signed, content)
}

// Check asks the gate about a call entry signed elsewhere. argSources are
// full IDs.
func (v *Envelopes) Check(ctx context.Context, env []byte, argSources map[string][]string) (*gate.Decision, error) {
	return v.e.checkEnvelope(ctx, env, argSources)
}

// Approve records an approval signed elsewhere.
func (v *Envelopes) Approve(ctx context.Context, env []byte) (*lineage.Node, error) {
	return v.e.approveEnvelope(ctx, env)
}

// Reject records a rejection signed elsewhere.
func (v *Envelopes) Reject(ctx context.Context, env []byte) (*lineage.Node, error) {
	return v.e.rejectEnvelope(ctx, env)
}
