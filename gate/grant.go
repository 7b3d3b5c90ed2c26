package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
)

// An approval is a signed entry by a principal with approval authority. It
// names one logged decision by ID, and the decision's ID is the hash of its
// record, which holds the proposer, the session, the digest of the exact
// tool and arguments and the justification: so the approval binds all of
// them. It allows the next identical call (same proposer, session, action
// and justification) once, before its signed expiry, which is at most the
// registry's approval cap after it was signed. Nothing about an approval is
// taken from an index row: at use, every approval the index names is
// verified again from its signed entry and the decision record.

// ClockSkew is how far in the future an approval's signing time may be:
// signers' clocks differ a little from the engine's.
const ClockSkew = 5 * time.Minute

// Approve records a signed approval entry for a logged decision. It is
// refused unless the approver holds approval authority, the approval binds
// the decision's session and action, its lifetime is within the cap, and the
// decision has no approval yet (one decision, one approval).
func (g *Gate) Approve(ctx context.Context, env []byte) (*lineage.Node, error) {
	// Who claims to approve is read before the signature is checked, only
	// to refuse a principal without approval authority in those words.
	if st, _, _, err := lineage.Open(env); err == nil && !g.graph.Registry().CanApprove(st.Principal) {
		return nil, fmt.Errorf("%w: %s holds no approval authority (a user-tier principal registered with --approver)", ErrApproval, st.Principal)
	}
	pending, err := g.graph.Prepare(ctx, env, nil)
	if err != nil {
		return nil, err
	}
	st := pending.Statement
	if st.Kind != lineage.KindApproval || st.Approval == nil {
		return nil, fmt.Errorf("%w: an approval entry is needed, not %s", ErrApproval, st.Kind)
	}
	if !lineage.IsID(st.Approval.Decision) {
		return nil, fmt.Errorf("%w: the approval names %q, not a full decision ID", ErrApproval, st.Approval.Decision)
	}
	d, err := g.Decision(st.Approval.Decision)
	if err != nil {
		return nil, err
	}
	now := g.clock()
	if err := g.checkGrant(st, d, now); err != nil {
		return nil, err
	}
	id := pending.Node.ID
	index := append(approvalPrefix(st.Session, st.Approval.Action), id...)
	err = g.graph.Commit(ctx, func(t *store.Txn) error {
		marker := []byte(pApproved + d.ID)
		if ok, err := t.Has(marker); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: decision %s is already approved: one decision, one approval", ErrApproval, d.ID[:12])
		}
		if err := pending.Write(t); err != nil {
			return err
		}
		if err := t.Set(marker, []byte(id)); err != nil {
			return err
		}
		return t.Set(index, []byte(st.Approval.Expires))
	}, len(env)+512)
	if err != nil {
		return nil, err
	}
	return pending.Node, nil
}

// checkGrant checks a signed approval statement against the decision it
// names, the registry, and the time now.
func (g *Gate) checkGrant(st *lineage.Statement, d *Decision, now time.Time) error {
	reg := g.graph.Registry()
	if !reg.CanApprove(st.Principal) {
		return fmt.Errorf("%w: %s holds no approval authority (a user-tier principal registered with --approver)", ErrApproval, st.Principal)
	}
	switch {
	case st.Approval.Decision != d.ID:
		return fmt.Errorf("%w: the approval names another decision", ErrApproval)
	case d.Decision == Allow:
		return fmt.Errorf("%w: decision %s already allowed the call", ErrApproval, d.ID[:12])
	case d.Session != st.Session || d.ArgsDigest != st.Approval.Action:
		return fmt.Errorf("%w: the approval does not bind the decision's session and action", ErrApproval)
	}
	signed, err1 := time.Parse(time.RFC3339Nano, st.Time)
	expires, err2 := time.Parse(time.RFC3339Nano, st.Approval.Expires)
	decided, err3 := time.Parse(time.RFC3339Nano, d.Time)
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return fmt.Errorf("%w: the approval's or the decision's times do not parse", ErrApproval)
	case !expires.After(signed):
		return fmt.Errorf("%w: the approval expires before it was signed", ErrApproval)
	case expires.Sub(signed) > reg.MaxApprovalTTL():
		return fmt.Errorf("%w: the approval's lifetime %s is over the cap of %s", ErrApproval, expires.Sub(signed), reg.MaxApprovalTTL())
	case signed.Before(decided.Add(-ClockSkew)):
		return fmt.Errorf("%w: the approval was signed before the decision it names", ErrApproval)
	case signed.After(now.Add(ClockSkew)):
		return fmt.Errorf("%w: the approval is signed in the future (%s)", ErrApproval, st.Time)
	case !expires.After(now):
		return fmt.Errorf("%w: the approval has expired", ErrApproval)
	}
	return nil
}

// approvals lists the approvals that can allow this call now: for each
// approval the index names for its session and action, the signed entry
// verifies against the frozen registry, it is unused, the decision it names
// is stored intact, was made on a call by the same proposer with the same
// justification, and the approval passes checkGrant (its expiry read from the
// signed statement).
func (g *Gate) approvals(cur *Decision, now time.Time) (*ast.Term, error) {
	var out []*ast.Term
	prefix := approvalPrefix(cur.Session, cur.ArgsDigest)
	err := g.db.View(func(t *store.Txn) error {
		return t.Iterate(prefix, false, func(k, _ []byte) error {
			id := string(k[len(prefix):])
			st, why, err := g.usableApproval(t, id, cur, now)
			if err != nil {
				return err
			}
			if st == nil {
				if why != "" {
					g.log.Warn("stored approval refused at use", "approval", id, "cause", why)
				}
				return nil
			}
			p, _ := g.graph.Registry().Lookup(st.Principal)
			out = append(out, obj("id", str(id), "approver", str(p.ID), "approver_tier", str(p.Tier.String()), "expires", str(st.Approval.Expires)))
			return nil
		})
	})
	return ast.ArrayTerm(out...), err
}

// usableApproval returns the approval's verified statement when it can
// allow cur now; nil and why not otherwise ("" when it is merely used).
// An error is a failure to read the store.
func (g *Gate) usableApproval(t *store.Txn, id string, cur *Decision, now time.Time) (*lineage.Statement, string, error) {
	if !lineage.IsID(id) {
		return nil, "the index names no entry ID", nil
	}
	if used, err := t.Has([]byte(pUsed + id)); err != nil || used {
		return nil, "", err
	}
	env, err := t.Get([]byte("e/" + id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, "no such approval entry", nil
	} else if err != nil {
		return nil, "", err
	}
	st, eid, err := g.graph.OpenVerified(env)
	switch {
	case err != nil:
		return nil, "the approval entry does not verify: " + err.Error(), nil
	case eid != id:
		return nil, "the approval entry is stored under another ID", nil
	case st.Kind != lineage.KindApproval || st.Approval == nil:
		return nil, "not an approval entry", nil
	case st.Session != cur.Session || st.Approval.Action != cur.ArgsDigest:
		return nil, "the approval is for another session or action", nil
	}
	body, err := t.Get([]byte(pDecision + st.Approval.Decision))
	if errors.Is(err, store.ErrNotFound) {
		return nil, "the approved decision is not stored", nil
	} else if err != nil {
		return nil, "", err
	}
	var d Decision
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != st.Approval.Decision {
		return nil, "the approved decision's record does not hash to its ID", nil
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, "the approved decision does not decode", nil
	}
	d.ID = st.Approval.Decision
	if err := g.checkGrant(st, &d, now); err != nil {
		return nil, err.Error(), nil
	}
	if d.Principal != cur.Principal || !sameSet(d.Justification, cur.Justification) {
		return nil, "the approval was for a call by another proposer or with another justification", nil
	}
	return st, "", nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}
