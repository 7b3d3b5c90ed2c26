package pedigree

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// Reject records a user's signed rejection of a denied (or ask) decision:
// it leaves the pending list and can no longer be approved.
func (e *Engine) Reject(ctx context.Context, signer *registry.Signer, rejecter, decisionID string) (*lineage.Node, error) {
	r, err := e.decisions.Record(decisionID)
	if err != nil {
		return nil, err
	}
	env, _, err := lineage.Sign(signer, BuildRejection(&r.Decision, rejecter, e.cfg.clock()))
	if err != nil {
		return nil, err
	}
	return e.reject(ctx, env)
}

// reject checks that a user-tier principal signed the rejection for a
// logged deny or ask of that session and action that nobody reviewed, then
// stores the entry, its log leaf and the review in one commit.
func (e *Engine) reject(ctx context.Context, env []byte) (*lineage.Node, error) {
	st, _, _, err := lineage.Open(env)
	if err != nil {
		return nil, err
	}
	d, err := e.checkRejection(st)
	if err != nil {
		return nil, err
	}
	pending, err := e.prepare(ctx, func() (*lineage.Pending, error) { return e.graph.Prepare(ctx, env, nil) })
	if err != nil {
		return nil, err
	}
	rec := &record{kind: recRejection, entry: pending, decision: d}
	if err := e.commit(ctx, rec); err != nil {
		return nil, err
	}
	if rec.existing != nil {
		return rec.existing, nil
	}
	return pending.Node, nil
}

// checkRejection checks a rejection statement against the registry and
// the decision it names, and returns the decision.
func (e *Engine) checkRejection(st *lineage.Statement) (*gate.Decision, error) {
	if st.Kind != lineage.KindRejection || st.Rejection == nil {
		return nil, fmt.Errorf("%w: a rejection entry is needed, not %s", gate.ErrApproval, st.Kind)
	}
	p, ok := e.reg.Lookup(st.Principal)
	if !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, st.Principal)
	}
	if p.Tier != registry.User {
		return nil, fmt.Errorf("%w: %s is %s tier; only a user-tier principal rejects", gate.ErrApproval, p.ID, p.Tier)
	}
	r, err := e.decisions.Record(st.Rejection.Decision)
	if err != nil {
		return nil, err
	}
	d := &r.Decision
	switch {
	case d.Decision == gate.Allow:
		return nil, fmt.Errorf("%w: decision %s allowed the call; there is nothing to reject", gate.ErrApproval, d.ID[:12])
	case d.Session != st.Session || d.ArgsDigest != st.Rejection.Action:
		return nil, fmt.Errorf("%w: the rejection does not bind the decision's session and action", gate.ErrApproval)
	}
	return d, nil
}

// Reviews lists every approval and rejection of a decision, oldest first,
// each checked against the signed entry it names.
func (e *Engine) Reviews(ctx context.Context) ([]gate.Review, error) {
	var out []gate.Review
	err := e.db.View(func(t *store.Txn) error {
		rs, err := e.decisions.Reviews(t.In(store.Decisions))
		if err != nil {
			return err
		}
		for _, r := range rs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := e.checkReview(t.In(store.Lineage), r); err != nil {
				return err
			}
		}
		out = rs
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b gate.Review) int { return compareTimes(a.Time, b.Time) })
	if out == nil {
		out = []gate.Review{}
	}
	return out, nil
}

// checkReview checks a review row, inside t, against the signed entry it
// names.
func (e *Engine) checkReview(t kv.Txn, r gate.Review) error {
	st, err := e.graph.StatementIn(t, r.Entry)
	if err != nil {
		return fmt.Errorf("%w: the review of decision %s names entry %s: %v", gate.ErrReviewTampered, r.DecisionID, r.Entry, err)
	}
	ok := st.Principal == r.By && st.Time == r.Time
	switch r.Outcome {
	case gate.Approved:
		ok = ok && st.Approval != nil && st.Approval.Decision == r.DecisionID
	case gate.Rejected:
		ok = ok && st.Rejection != nil && st.Rejection.Decision == r.DecisionID
	default:
		ok = false
	}
	if !ok {
		return fmt.Errorf("%w: the review row of decision %s does not match the entry it names", gate.ErrReviewTampered, r.DecisionID)
	}
	return nil
}

func compareTimes(a, b string) int {
	// The nano layout drops trailing zeros, so the strings do not sort as
	// times: parse them.
	ta, ea := time.Parse(time.RFC3339Nano, a)
	tb, eb := time.Parse(time.RFC3339Nano, b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	return ta.Compare(tb)
}

// Pending lists the denies and asks nobody has approved or rejected yet,
// newest first, with where each argument came from. A decision whose call
// entry was refused (a fail-closed deny before the policy ran) is left
// out: there is no stored call to approve.
func (e *Engine) Pending(ctx context.Context) ([]gate.Pending, error) {
	ds, err := e.decisions.Decisions(ctx, 0, "")
	if err != nil {
		return nil, err
	}
	reviewed := map[string]bool{}
	rs, err := e.Reviews(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		reviewed[r.DecisionID] = true
	}
	out := []gate.Pending{}
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.Decision == gate.Allow || reviewed[d.ID] {
			continue
		}
		p, err := e.subject(&d)
		if errors.Is(err, lineage.ErrUnknownEntry) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// Subject is one logged decision as a person reviews it, with the evidence
// Pending lists (the exact call, where each argument came from, which
// arguments are protected), whether or not it was reviewed: what an ask
// shows (gate.Pending.View). A decision whose call entry was refused has
// none: lineage.ErrUnknownEntry.
func (e *Engine) Subject(ctx context.Context, decisionID string) (*gate.Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := e.decisions.Record(decisionID)
	if err != nil {
		return nil, err
	}
	return e.subject(&r.Decision)
}

func (e *Engine) subject(d *gate.Decision) (*gate.Pending, error) {
	env, _, err := e.graph.Envelope(d.CallID)
	if err != nil {
		return nil, err
	}
	st, _, _, err := lineage.Open(env)
	if err != nil {
		return nil, err
	}
	// What a person is shown is what the decision (and so an approval of
	// it) binds: the digest of the exact tool and arguments.
	if lineage.ActionDigest(st.Tool, st.Args) != d.ArgsDigest {
		return nil, fmt.Errorf("decision %s: its call entry %s holds another action: %w", d.ID[:12], d.CallID[:12], registry.ErrTampered)
	}
	rec, err := e.decisions.Record(d.ID)
	if err != nil {
		return nil, err
	}
	args, err := gate.ArgumentsOf(rec.Input)
	if err != nil {
		return nil, fmt.Errorf("decision %s: its logged input: %w", d.ID[:12], err)
	}
	return &gate.Pending{DecisionID: d.ID, Decision: d.Decision, Tool: d.Tool, Args: st.Args, Session: d.Session,
		Principal: d.Principal, Time: d.Time, CallID: d.CallID, Reasons: d.Reasons, Untrusted: d.Untrusted,
		Arguments: args, Plan: st.Plan}, nil
}

// BuildRejection builds a rejection of decision d by rejecter.
func BuildRejection(d *gate.Decision, rejecter string, now time.Time) *lineage.Statement {
	return &lineage.Statement{
		Version: 1, Principal: rejecter, Kind: lineage.KindRejection, Session: d.Session,
		ContentDigest: lineage.DigestContent([]byte(d.ID)), Parents: []lineage.Parent{}, Time: lineage.FormatTime(now),
		Rejection: &lineage.Rejection{Decision: d.ID, Action: d.ArgsDigest},
	}
}

// verifyReviews checks, inside one read transaction, every review row
// against the signed entry it names, and that every rejection entry has its
// review row: deleting the row would make a rejected decision approvable.
func (e *Engine) verifyReviews(lt, dt kv.Txn, entries map[string]uint64, bad func(id, f string, a ...any)) error {
	rs, err := e.decisions.Reviews(dt)
	if err != nil {
		bad("", "%v", err)
		return nil
	}
	byEntry := make(map[string]gate.Review, len(rs))
	for _, r := range rs {
		if err := e.checkReview(lt, r); err != nil {
			bad(r.DecisionID, "%v", err)
		}
		byEntry[r.Entry] = r
	}
	ids := make([]string, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}
	nodes, err := e.graph.NodesIn(lt, ids)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Kind != lineage.KindRejection {
			continue
		}
		st, err := e.graph.StatementIn(lt, n.ID)
		if err != nil {
			continue // lineage's verify reports the entry itself
		}
		if r, ok := byEntry[n.ID]; !ok || r.DecisionID != st.Rejection.Decision || r.Outcome != gate.Rejected {
			bad(n.ID, "rejection of decision %s has no review row: the decision could be approved", st.Rejection.Decision)
		}
	}
	return nil
}
