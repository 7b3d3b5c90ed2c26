package lineage

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// A call justified by its session's whole context may name that context by
// reference (ContextRef) instead of listing every entry of it: its
// statement, its node row and its validation then cost O(arguments), not
// O(context). The reference is as binding as the list (the signed head fixes
// the N IDs in order), so only where the list is read from moves: from the
// envelope to the context rows, which are derived and unsigned. Each reader
// therefore checks the rows it reads against the signed head: insert, walks
// and verify (docs/performance.md, issue 31).

// refPrefix is the first N entries of a session's context, as a reference
// names them.
type refPrefix struct {
	ids   []string
	nodes []*Node // nil when read for a walk, which needs the IDs only
	// eff and reach are the entries the prefix's labels come from: the
	// first of the highest effective tier, and of the highest reach tier.
	eff, reach *Node
}

// refPrealloc bounds the room readRef makes before it has read a row.
const refPrealloc = 1024

// headHex is a chain head as a reference writes it.
func headHex(c [32]byte) string { return hex.EncodeToString(c[:]) }

// summaryRef resolves ref from session's summary in memory: nil when the
// summary does not hold ref.N entries (the caller reads the rows), an error
// wrapping registry.ErrTampered when it does and its chain at ref.N is not
// ref.Head.
func (g *Graph) summaryRef(session string, ref *ContextRef) (*refPrefix, error) {
	ss := g.summaries.get(session, false)
	if ss == nil {
		return nil, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := ref.N
	if len(ss.ids) < k {
		return nil, nil
	}
	if headHex(ss.chains[k-1]) != ref.Head {
		return nil, fmt.Errorf("the first %d entries of the context of session %s do not hash to the call's context reference: %w", k, session, registry.ErrTampered)
	}
	return &refPrefix{ids: ss.ids[:k:k], nodes: ss.nodes[:k:k], eff: ss.nodes[ss.eff[k-1]], reach: ss.nodes[ss.reach[k-1]]}, nil
}

// readRef resolves ref inside t with one range read of session's context
// rows 0 to ref.N-1, checked against ref.Head: a row dropped, swapped or
// renamed is refused (registry.ErrTampered), a reference past the context
// is ErrUnknownParent. With nodes set, it reads the prefix's nodes and the
// entries its labels come from.
func (g *Graph) readRef(t kv.Txn, session string, ref *ContextRef, nodes bool) (*refPrefix, error) {
	// The count is the client's, up to MaxContextRef: room is made for
	// the rows as they are read, never for a count they have not shown.
	p := &refPrefix{ids: make([]string, 0, min(ref.N, refPrealloc))}
	var chain contextHead
	prefix := append(append([]byte(pSession), session...), 0)
	tampered := func(f string, a ...any) error {
		return fmt.Errorf("the context of session %s "+f+": context rows were edited: %w", append(append([]any{session}, a...), registry.ErrTampered)...)
	}
	var bad error
	if err := t.Iterate(prefix, true, func(k, v []byte) error {
		pos := k[len(prefix):]
		if len(pos) != 8 || binary.BigEndian.Uint64(pos) != uint64(len(p.ids)) {
			bad = tampered("has no entry at %d", len(p.ids))
			return kv.ErrStop
		}
		p.ids = append(p.ids, string(v))
		chain = chain.add(string(v))
		if len(p.ids) == ref.N {
			return kv.ErrStop
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	if len(p.ids) < ref.N {
		h, err := readHead(t, session)
		if err != nil {
			return nil, err
		}
		if h.n >= uint64(ref.N) {
			return nil, tampered("has %d rows, its head counts %d", len(p.ids), h.n)
		}
		return nil, fmt.Errorf("%w: the call names the first %d entries of the context of session %s, which holds %d", ErrUnknownParent, ref.N, session, len(p.ids))
	}
	if headHex(chain.chain) != ref.Head {
		return nil, tampered("does not hash, at %d entries, to the call's context reference", ref.N)
	}
	if !nodes {
		return p, nil
	}
	p.nodes = make([]*Node, len(p.ids))
	for i, id := range p.ids {
		n, err := g.node(t, id)
		if errors.Is(err, ErrUnknownEntry) {
			return nil, fmt.Errorf("%w %s (entry %d of the context of session %s)", ErrUnknownParent, id, i, session)
		}
		if err != nil {
			return nil, err
		}
		p.nodes[i] = n
		if i == 0 || n.Effective > p.eff.Effective {
			p.eff = n
		}
		if i == 0 || n.Reach > p.reach.Reach {
			p.reach = n
		}
	}
	return p, nil
}

// labelRefCached labels a statement that names its context by reference,
// from the summary and the node cache when they hold everything (no read
// transaction), else inside one. It returns the node and a copy of st that
// carries its expanded parents (AllParents).
func (g *Graph) labelRefCached(st *Statement, id string, tier registry.Tier) (*Node, *Statement, error) {
	// A statement from Preview was not validated: its reference must be
	// one before the summary is indexed by it.
	if err := st.validateRef(); err != nil {
		return nil, nil, err
	}
	p, err := g.summaryRef(st.Session, st.Context)
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		listed := make([]*Node, len(st.Parents))
		all := true
		for i, par := range st.Parents {
			if listed[i] = g.cache.get(par.ID); listed[i] == nil {
				all = false
				break
			}
		}
		if all {
			return g.labelRefFrom(st, id, tier, p, listed)
		}
	}
	var n *Node
	var out *Statement
	err = g.store.View(func(t kv.Txn) error {
		var err error
		n, out, err = g.labelRefIn(t, st, id, tier)
		return err
	})
	return n, out, err
}

// labelRefIn is labelRefCached inside t.
func (g *Graph) labelRefIn(t kv.Txn, st *Statement, id string, tier registry.Tier) (*Node, *Statement, error) {
	p, err := g.summaryRef(st.Session, st.Context)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		if p, err = g.readRef(t, st.Session, st.Context, true); err != nil {
			return nil, nil, err
		}
	}
	listed := make([]*Node, len(st.Parents))
	for i, par := range st.Parents {
		pn, err := g.node(t, par.ID)
		if errors.Is(err, ErrUnknownEntry) {
			return nil, nil, fmt.Errorf("%w %s", ErrUnknownParent, par.ID)
		}
		if err != nil {
			return nil, nil, err
		}
		listed[i] = pn
	}
	return g.labelRefFrom(st, id, tier, p, listed)
}

// labelRefFrom is labelFrom over the expanded parents: the prefix's
// summary folded first (as labelSummarised: the fold of its entries one by
// one, since propagate keeps the first of the highest), then each listed
// parent, none of which may be among the prefix.
func (g *Graph) labelRefFrom(st *Statement, id string, tier registry.Tier, p *refPrefix, listed []*Node) (*Node, *Statement, error) {
	if err := listedTwice(p.ids, st.Parents); err != nil {
		return nil, nil, err
	}
	n := &Node{
		ID: id, Principal: st.Principal, Kind: st.Kind, Session: st.Session, Tool: st.Tool, Time: st.Time,
		Tier: tier, Effective: tier, Reach: tier, NParents: len(p.ids) + len(st.Parents), Parents: st.Parents,
		Context: &ContextRef{N: st.Context.N, Head: st.Context.Head},
	}
	if !tier.Trusted() {
		n.EffectiveRoot, n.ReachRoot = id, id
	}
	if p.eff.Effective > n.Effective {
		n.Effective, n.EffectiveVia, n.EffectiveRoot = p.eff.Effective, p.eff.ID, p.eff.EffectiveRoot
	}
	if p.reach.Reach > n.Reach {
		n.Reach, n.ReachVia, n.ReachRoot = p.reach.Reach, p.reach.ID, p.reach.ReachRoot
	}
	for i, par := range st.Parents {
		propagate(n, listed[i], par.Weight, g.reg.Tau())
	}
	if st.expanded != nil {
		// Expanded already (Expand), from the same signed head: the same
		// entries.
		return n, st, nil
	}
	c := *st
	c.expanded = expandParents(p.ids, st.Parents)
	return n, &c, nil
}

// expandParents are a reference's entries, strong, then the listed parents.
func expandParents(ids []string, listed []Parent) []Parent {
	out := make([]Parent, len(ids), len(ids)+len(listed))
	for i, id := range ids {
		out[i] = Parent{ID: id, Weight: 1}
	}
	return append(out, listed...)
}

// listedTwice refuses listed parents among ids, the entries a reference
// names. Only a call that lists parents besides its reference pays for
// the look-up.
func listedTwice(ids []string, listed []Parent) error {
	if len(listed) == 0 {
		return nil
	}
	named := make(map[string]bool, len(listed))
	for _, par := range listed {
		named[par.ID] = true
	}
	for _, pid := range ids {
		if named[pid] {
			return fmt.Errorf("%w: the call lists %s, which its context reference names already", ErrMalformed, pid)
		}
	}
	return nil
}

// Expand resolves the context reference of a statement that names one
// (Statement.AllParents), checking it against the context as Prepare does;
// a statement without one is returned as it is. For readers of statements
// that did not come through Prepare (a preview, a stored call read back).
func (g *Graph) Expand(st *Statement) (*Statement, error) {
	if st.Context == nil || st.expanded != nil {
		return st, nil
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	var out *Statement
	err := g.store.View(func(t kv.Txn) error {
		p, err := g.summaryRef(st.Session, st.Context)
		if err != nil {
			return err
		}
		if p == nil {
			if p, err = g.readRef(t, st.Session, st.Context, false); err != nil {
				return err
			}
		}
		c := *st
		c.expanded = expandParents(p.ids, st.Parents)
		out = &c
		return nil
	})
	return out, err
}

// ContextRef returns the reference to session's whole context as it is
// now: its count and the chain over it, read and checked as Context reads
// it. Nil for an empty context (a call there names no parents).
func (g *Graph) ContextRef(session string) (*ContextRef, error) {
	var ref *ContextRef
	err := g.store.View(func(t kv.Txn) error {
		ids, err := g.contextIn(t, session)
		if err != nil || len(ids) == 0 {
			return err
		}
		// contextIn checked ids against the head it read; read it again
		// inside the same transaction for its chain.
		h, err := readHead(t, session)
		if err != nil {
			return err
		}
		if h.n != uint64(len(ids)) {
			return fmt.Errorf("the context of session %s changed while it was read: %w", session, registry.ErrTampered)
		}
		ref = &ContextRef{N: len(ids), Head: headHex(h.chain)}
		return nil
	})
	return ref, err
}

// edgesIn are n's parent edges inside t, in order: for a node that names
// its context by reference, the context's first N entries (one range read,
// checked against the reference's head: a tampered row fails the read
// rather than hide an ancestor), then its listed parents.
func (g *Graph) edgesIn(t kv.Txn, n *Node) ([]Edge, error) {
	listed := n.Edges(g.reg.Tau())
	if n.Context == nil {
		return listed, nil
	}
	p, err := g.readRef(t, n.Session, n.Context, false)
	if err != nil {
		return nil, fmt.Errorf("entry %s: %w", n.ID, err)
	}
	out := make([]Edge, len(p.ids), len(p.ids)+len(listed))
	for i, pid := range p.ids {
		out[i] = Edge{Child: n.ID, Parent: pid, Weight: 1, Strong: true}
	}
	return append(out, listed...), nil
}

// sameRef reports whether two references are equal (both nil, or the same
// count and head).
func sameRef(a, b *ContextRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
