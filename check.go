package pedigree

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// check decides on a proposed call. It verifies the call entry (prepared
// by the caller from a signed statement or an envelope), reads the facts in
// one read transaction, asks the gate, then stores the call entry, its log
// leaf, the decision and its leaf, the trajectory step and the use of an
// approval in one durable commit. Every failure to decide is a deny with its
// cause in the reasons; an error is returned only when the call cannot be
// read or the decision cannot be stored, and the caller must treat that as
// a deny.
func (e *Engine) check(ctx context.Context, pending *lineage.Pending, refused error, st *lineage.Statement, callID string, argSources map[string][]string) (*gate.Decision, error) {
	d, _, err := e.stage(ctx, pending, refused, st, callID, argSources, false)
	return d, err
}

// stage is check, and, when early is set and the decision is an allow that
// may be acted on before it is durable (earlyAllowed), returns before the
// commit: the commit goes on, whatever ctx says, and the function returned
// waits for it. That function is nil when the decision is stored already.
func (e *Engine) stage(ctx context.Context, pending *lineage.Pending, refused error, st *lineage.Statement, callID string, argSources map[string][]string, early bool) (*gate.Decision, func() error, error) {
	now := e.cfg.clock()
	if pending != nil {
		// The prepared statement: a context reference resolved.
		st = pending.Statement
	}
	if st.Kind != lineage.KindCall {
		return nil, nil, fmt.Errorf("%w: the gate checks call entries, not %s", lineage.ErrMalformed, st.Kind)
	}
	d := e.gate.NewDecision(st, callID, now)
	if refused != nil {
		// The call entry is not stored: it was refused.
		d, err := e.failClosed(ctx, d, nil, "the call entry was refused: "+refused.Error())
		return d, nil, err
	}
	if err := e.checkParentless(ctx, st); err != nil {
		d, err := e.failClosed(ctx, d, nil, err.Error())
		return d, nil, err
	}
	for attempt := 0; ; attempt++ {
		f, err := e.facts(pending.Statement, pending.Node, argSources, now, e.gate.Lean())
		if err != nil {
			d, err := e.failClosed(ctx, d, nil, err.Error())
			return d, nil, err
		}
		ev, err := e.gate.Decide(ctx, f, d, now)
		if err == nil && early && e.earlyAllowed(d) {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			// The input is encoded for the log, and the decision sealed and
			// stored, while the caller forwards the call.
			done := make(chan error, 1)
			bctx := context.WithoutCancel(ctx)
			go func() {
				err := ev.Encode()
				if err == nil {
					err = e.storeDecision(bctx, d, ev, pending)
				}
				done <- err
			}()
			return d, sync.OnceValue(func() error { return <-done }), nil
		}
		if eerr := ev.Encode(); err == nil {
			err = eerr
		}
		if err != nil {
			d, err := e.failClosed(ctx, d, ev.Input, err.Error())
			return d, nil, err
		}
		err = e.storeDecision(ctx, d, ev, pending)
		if errors.Is(err, decisionlog.ErrApprovalUsed) && attempt < 3 {
			continue // another check used the approval meanwhile: decide again without it
		}
		if err != nil {
			return nil, nil, err
		}
		return d, nil, nil
	}
}

// earlyAllowed reports whether d may be acted on before it is stored: an
// allow, of a tool the catalog says is not sensitive (an unknown tool is
// sensitive), that spent no approval (an approval is single use, and only
// the commit tells whether another check used it first).
func (e *Engine) earlyAllowed(d *gate.Decision) bool {
	if d.Decision != gate.Allow || d.Approval != "" {
		return false
	}
	t, _ := e.gate.Catalog().Lookup(d.Tool)
	return !t.IsSensitive()
}

// failClosed logs d as a deny with cause. The call entry is not stored: it
// was refused, or nothing was decided on it.
func (e *Engine) failClosed(ctx context.Context, d *gate.Decision, input []byte, cause string) (*gate.Decision, error) {
	gate.FailClosed(d, cause)
	if err := e.storeDecision(ctx, d, &gate.Evaluation{Input: input}, nil); err != nil {
		return nil, err
	}
	e.cfg.log.Warn("gate failed closed", "call", d.CallID, "tool", d.Tool, "cause", cause)
	return d, nil
}

// facts reads, in one read transaction, what the gate decides on: the
// nodes the call names with the sources of their untrusted labels, the
// session's trajectory, and the approvals of this exact action that verify.
// For a gate whose policy input is lean (gate.Gate.Lean), a justification
// that is its session's context is read through the context's summary.
func (e *Engine) facts(st *lineage.Statement, call *lineage.Node, argSources map[string][]string, now time.Time, lean bool) (*gate.Facts, error) {
	f := &gate.Facts{Statement: st, Call: call, ArgSources: argSources,
		Nodes: map[string]*lineage.Node{}, Sources: map[string][]lineage.Source{}}
	// A justification that is the session's context, summarised: only its
	// untrusted entries are read (the gate leaves the others out).
	var sum *lineage.Summary
	if lean && st.Plan == nil {
		sum = e.graph.Summary(st)
	}
	var ids []string
	if sum != nil {
		f.Summarised = true
		ids = append(ids, sum.Untrusted...)
	} else {
		ps, err := st.AllParents()
		if err != nil {
			return nil, err
		}
		ids = make([]string, 0, len(ps))
		for _, par := range ps {
			ids = append(ids, par.ID)
		}
	}
	for _, srcs := range argSources {
		ids = append(ids, srcs...)
	}
	err := e.db.View(func(t *store.Txn) error {
		lt, dt := t.In(store.Lineage), t.In(store.Decisions)
		nodes, err := e.graph.NodesIn(lt, ids)
		if err != nil {
			return err
		}
		sources, err := e.graph.WitnessesIn(lt, nodes)
		if err != nil {
			return err
		}
		for i, n := range nodes {
			f.Nodes[n.ID], f.Sources[n.ID] = n, sources[i]
		}
		if f.Plan, err = e.planFact(lt, st, call.ID, f.Nodes, argSources); err != nil {
			return err
		}
		if f.Trajectory, err = e.decisions.TrajectoryIn(dt, st.Session); err != nil {
			return err
		}
		f.Approvals, err = e.approvals(lt, dt, t.In(store.Log), st, now)
		return err
	})
	return f, err
}

// approvals are the approvals that can still allow this call now: indexed
// and unused, and, read from the signed entry itself (never from the
// index), verified against the frozen registry, by a principal with approval
// authority, for a logged decision whose record hashes to its ID and was
// made on a call by the same proposer, in the same session, of the same
// action, with a justification the call's still holds whole (it may have
// grown since: see grant.go); within the approval cap, and not
// expired by the signed expiry (see grant.go); and unused by the log
// itself, never by a row that says so alone (unspent).
func (e *Engine) approvals(lt, dt, logT *store.Txn, call *lineage.Statement, now time.Time) ([]gate.Approval, error) {
	action := lineage.ActionDigest(call.Tool, call.Args)
	cands, err := e.decisions.Candidates(dt, call.Session, action)
	if err != nil {
		return nil, err
	}
	var out []gate.Approval
	for _, c := range cands {
		st, p, err := e.graph.ApprovalIn(lt, c.ID)
		if err != nil {
			e.cfg.log.Warn("an indexed approval does not verify: ignored", "approval", c.ID, "error", err)
			continue
		}
		g := st.Approval
		if st.Session != call.Session || g == nil || g.Action != action {
			continue
		}
		d, err := e.decisions.VerifiedRecord(dt, g.Decision)
		if err != nil {
			e.cfg.log.Warn("an approval names a decision that is not stored intact: ignored", "approval", c.ID, "error", err)
			continue
		}
		if err := e.checkGrant(st, d, now); err != nil {
			continue
		}
		if _, err := e.graph.NodesIn(lt, []string{d.CallID}); err != nil {
			continue // a refused call's decision binds no justification (refusedCall)
		}
		if d.Principal != call.Principal {
			continue
		}
		if same, err := e.sameJustification(lt, d, call); err != nil || !same {
			continue
		}
		if err := e.unspent(logT, dt, c.ID); err != nil {
			e.cfg.log.Warn("an approval's use cannot be ruled out from the log: ignored", "approval", c.ID, "error", err)
			continue
		}
		out = append(out, gate.Approval{ID: c.ID, Approver: p.ID, Tier: p.Tier, Expires: g.Expires})
	}
	return out, nil
}

// unspent checks, from the log's own leaves, that no logged decision used
// the approval: every leaf after the approval's own must be there, each
// decision among them stored intact (hashing to the ID its leaf names),
// and none may name the approval. The row that records a use (dec/au/) is
// only a hint that can deny: deleting it, or any row this reads, costs the
// approval, never buys it a second use. The scan covers the records logged
// since the approval, which the approval cap bounds in time.
func (e *Engine) unspent(logT, dt *store.Txn, approval string) error {
	at, err := tlog.LeafIndex(logT, tlog.LeafEntry, approval)
	if err != nil {
		return err
	}
	return tlog.LeavesFrom(logT, at+1, func(i uint64, kind byte, id string) error {
		if !e.cfg.fleetNode {
			// Leaves renumbered after one was dropped are not the
			// engine's.
			if err := e.checkAttestation(logT, i, kind, id); err != nil {
				return fmt.Errorf("leaf %d: %w", i, err)
			}
		}
		if kind != tlog.LeafDecision {
			return nil
		}
		used, err := e.decisions.Uses(dt, id, approval)
		if err != nil {
			return fmt.Errorf("leaf %d: %w", i, err)
		}
		if used {
			return fmt.Errorf("%w: by decision %s", decisionlog.ErrApprovalUsed, id)
		}
		return nil
	})
}

// storeDecision seals d and stores it with its log leaf, after the call
// entry and its leaf when call is not nil, in one commit.
func (e *Engine) storeDecision(ctx context.Context, d *gate.Decision, ev *gate.Evaluation, call *lineage.Pending) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, err := decisionlog.Seal(d, ev.Input, ev.Step)
	if err != nil {
		return err
	}
	return e.commit(ctx, &record{kind: recDecision, entry: call, decision: d, body: body, input: ev.Input, step: ev.Step})
}

// approve records a signed approval of a logged decision, after checking
// that a principal with approval authority signed it for that decision's
// session and action, within the approval cap, unexpired, that the decision
// was not allowed, and that it has no approval yet (one decision, one
// approval). The entry, its log leaf, its index row and the decision's
// approval marker are one record.
func (e *Engine) approve(ctx context.Context, env []byte) (*lineage.Node, error) {
	st, _, _, err := lineage.Open(env)
	if err != nil {
		return nil, err
	}
	d, err := e.checkApproval(st, e.cfg.clock())
	if err != nil {
		return nil, err
	}
	if err := e.checkNotRejected(d.ID); err != nil {
		return nil, err
	}
	pending, err := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.Prepare(ctx, env, nil) })
	if err != nil {
		return nil, err
	}
	rec := &record{kind: recApproval, entry: pending}
	err = e.commit(ctx, rec)
	if errors.Is(err, decisionlog.ErrApproved) {
		return nil, fmt.Errorf("%w: decision %s: %v", gate.ErrApproval, d.ID[:12], err)
	}
	if err != nil {
		return nil, err
	}
	if rec.existing != nil {
		return rec.existing, nil
	}
	return pending.Node, nil
}

// checkApproval checks an approval statement against the registry and the
// decision it names, at now (checkGrant), and returns the decision. A fleet
// node applying an approval from the stream checks it at its signing time,
// so that every node reaches the same verdict whenever it applies it;
// expiry is checked again at use.
func (e *Engine) checkApproval(st *lineage.Statement, now time.Time) (*gate.Decision, error) {
	if st.Kind != lineage.KindApproval || st.Approval == nil {
		return nil, fmt.Errorf("%w: an approval entry is needed, not %s", gate.ErrApproval, st.Kind)
	}
	if _, ok := e.reg.Lookup(st.Principal); !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, st.Principal)
	}
	if !e.reg.CanApprove(st.Principal) {
		return nil, fmt.Errorf("%w: %s holds no approval authority (a user-tier principal registered with --approver)", gate.ErrApproval, st.Principal)
	}
	if !lineage.IsID(st.Approval.Decision) {
		return nil, fmt.Errorf("%w: the approval names %q, not a full decision ID", gate.ErrApproval, st.Approval.Decision)
	}
	r, err := e.decisions.Record(st.Approval.Decision)
	if err != nil {
		return nil, err
	}
	d := &r.Decision
	if err := e.checkGrant(st, d, now); err != nil {
		return nil, err
	}
	if _, err := e.graph.Node(d.CallID); err != nil {
		return nil, refusedCall(d, err)
	}
	return d, nil
}

// refusedCall is why a decision whose call entry is not stored (err, from
// reading it) cannot be approved: the call was refused, or nothing was
// decided on it, so its parents may never have been read (a context
// reference that did not resolve names none), and an approval of it would
// bind no justification, allowing its action whatever it rests on.
func refusedCall(d *gate.Decision, err error) error {
	if errors.Is(err, lineage.ErrUnknownEntry) {
		return fmt.Errorf("%w: decision %s is on a call entry that was refused (not stored): there is no justification to approve", gate.ErrApproval, d.ID[:12])
	}
	return err
}

// Preview is the decision the gate would make on a call now, with nothing
// signed or stored (no call entry, no decision logged, no approval used): a
// dry run, and what `pedigree bench` measures as a decision alone.
func (e *Engine) Preview(ctx context.Context, c Call) (*gate.Decision, error) {
	st, srcs, err := e.callStatement(ctx, c)
	if err != nil {
		return nil, err
	}
	if st, err = e.graph.Expand(st); err != nil {
		return nil, err
	}
	call, err := e.graph.Preview(st)
	if err != nil {
		return nil, err
	}
	now := e.cfg.clock()
	d := e.gate.NewDecision(st, call.ID, now)
	f, err := e.facts(st, call, srcs, now, e.gate.Lean())
	if err == nil {
		_, err = e.gate.Decide(ctx, f, d, now)
	}
	if err != nil {
		gate.FailClosed(d, err.Error())
	}
	return d, nil
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

// DefaultApprovalTTL is how long an approval stays usable.
const DefaultApprovalTTL = 15 * time.Minute

// approveEnvelope records an approval signed elsewhere.
func (e *Engine) approveEnvelope(ctx context.Context, env []byte) (*lineage.Node, error) {
	n, err := e.approve(ctx, env)
	if err != nil {
		return nil, e.refused(ctx, err, claimed(env), env)
	}
	return n, nil
}

// checkNotRejected refuses, before anything is signed or stored, to approve
// a rejected decision.
func (e *Engine) checkNotRejected(decisionID string) error {
	return e.db.View(func(t *store.Txn) error {
		r, err := e.decisions.ReviewIn(t.In(store.Decisions), decisionID)
		if err != nil || r == nil || r.Outcome != gate.Rejected {
			return err
		}
		return gate.ReviewConflict(r)
	})
}
