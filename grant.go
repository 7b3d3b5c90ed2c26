package pedigree

import (
	"fmt"
	"slices"
	"time"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
)

// An approval is a signed entry by a principal with approval authority. It
// names one logged decision by ID, and the decision's ID is the hash of its
// record, which holds the proposer, the session, the digest of the exact
// tool and arguments and the justification: so the approval binds all of
// them. It allows the next call of the same action by the same proposer in
// the same session once, before its signed expiry, which is at most the
// registry's approval cap after it was signed. The justification may have
// grown meanwhile (the person said "I approved it, retry", and that prompt
// joined the context), but not lost an entry: the sources the person was
// shown are still among the call's. What the person approved is the
// action, and none of it may change (SECURITY.md, "What an approval binds"). Nothing about an approval is
// taken from an index row: at use, every approval the index names is
// verified again from its signed entry and the decision record.

// ClockSkew is how far in the future an approval's signing time may be:
// signers' clocks differ a little from the engine's.
const ClockSkew = 5 * time.Minute

// checkGrant checks a signed approval statement against the decision it
// names, the registry, and the time now.
func (e *Engine) checkGrant(st *lineage.Statement, d *gate.Decision, now time.Time) error {
	reg := e.reg
	if !reg.CanApprove(st.Principal) {
		return fmt.Errorf("%w: %s holds no approval authority (a user-tier principal registered with --approver)", gate.ErrApproval, st.Principal)
	}
	switch {
	case st.Approval.Decision != d.ID:
		return fmt.Errorf("%w: the approval names another decision", gate.ErrApproval)
	case d.Decision == gate.Allow:
		return fmt.Errorf("%w: decision %s already allowed the call", gate.ErrApproval, d.ID[:12])
	case d.Session != st.Session || d.ArgsDigest != st.Approval.Action:
		return fmt.Errorf("%w: the approval does not bind the decision's session and action", gate.ErrApproval)
	}
	signed, err1 := time.Parse(time.RFC3339Nano, st.Time)
	expires, err2 := time.Parse(time.RFC3339Nano, st.Approval.Expires)
	decided, err3 := time.Parse(time.RFC3339Nano, d.Time)
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return fmt.Errorf("%w: the approval's or the decision's times do not parse", gate.ErrApproval)
	case !expires.After(signed):
		return fmt.Errorf("%w: the approval expires before it was signed", gate.ErrApproval)
	case expires.Sub(signed) > reg.MaxApprovalTTL():
		return fmt.Errorf("%w: the approval's lifetime %s is over the cap of %s", gate.ErrApproval, expires.Sub(signed), reg.MaxApprovalTTL())
	case signed.Before(decided.Add(-ClockSkew)):
		return fmt.Errorf("%w: the approval was signed before the decision it names", gate.ErrApproval)
	case signed.After(now.Add(ClockSkew)):
		return fmt.Errorf("%w: the approval is signed in the future (%s)", gate.ErrApproval, st.Time)
	case !expires.After(now):
		return fmt.Errorf("%w: the approval has expired", gate.ErrApproval)
	}
	return nil
}

// within says whether every ID of a is in b. Both can be a whole
// session's context (a call naming it by reference), so it is linear.
func within(a, b []string) bool {
	in := make(map[string]struct{}, len(b))
	for _, id := range b {
		in[id] = struct{}{}
	}
	for _, id := range a {
		if _, ok := in[id]; !ok {
			return false
		}
	}
	return true
}

// parentIDs are a call statement's justification: every parent, a context
// reference's entries included (an approval binds the same justification
// whichever form names it).
func parentIDs(st *lineage.Statement) ([]string, error) {
	ps, err := st.AllParents()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out, nil
}

// wholeJustification is logged decision d's justification with its context
// reference expanded (gate.Decision.Whole). The reference is expanded from
// the call d decided on, read inside t from its signed entry, which must
// name the same reference and list the same parents as d (a decision whose
// call says otherwise is ErrTampered), and checked against the session's
// context rows as every reference is (lineage.Graph.Expand).
func (e *Engine) wholeJustification(t kv.Txn, d *gate.Decision) ([]string, error) {
	if w, err := d.Whole(); err == nil {
		return w, nil
	}
	st, err := e.graph.StatementIn(t, d.CallID)
	if err != nil {
		return nil, fmt.Errorf("decision %s: its call: %w", short(d.ID), err)
	}
	listed := make([]string, len(st.Parents))
	for i, p := range st.Parents {
		listed[i] = p.ID
	}
	if st.Context == nil || *st.Context != *d.Context || !slices.Equal(listed, d.Justification) {
		return nil, fmt.Errorf("decision %s names a justification its call %s does not: %w", short(d.ID), short(d.CallID), ErrTampered)
	}
	if st, err = e.graph.Expand(st); err != nil {
		return nil, fmt.Errorf("decision %s: its call's context: %w", short(d.ID), err)
	}
	ps, err := st.AllParents()
	if err != nil {
		return nil, err
	}
	prefix := make([]string, d.Context.N)
	for i := range prefix {
		prefix[i] = ps[i].ID
	}
	d.SetWhole(prefix)
	return d.Whole()
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
