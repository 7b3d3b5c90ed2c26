package pedigree

import (
	"context"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
)

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

// rejectEnvelope records a rejection signed elsewhere.
func (e *Engine) rejectEnvelope(ctx context.Context, env []byte) (*lineage.Node, error) {
	return e.reject(ctx, env)
}
