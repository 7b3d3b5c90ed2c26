package lineage

import (
	"fmt"
	"sync"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// A call (or an agent's entry) justified by its session's context names
// every entry of the context as a strong parent, so labelling it and
// deciding on it read the whole context: a call late in a long session cost
// more than an early one. The graph keeps, per session, the context as a
// running summary, extended as entries join: for every prefix, the entries
// whose labels the prefix's labels come from (the first entry of the
// highest effective tier, and of the highest reach tier: what folding the
// prefix's entries one after the other as strong parents gives, see
// propagate), and the positions of the entries that carry an untrusted
// label. An entry whose parents are exactly the first k entries of its
// session's context, all strong, is labelled from the summary of that
// prefix, and the gate reads only the prefix's untrusted entries
// (Summary). Nothing of it is stored: it is derived, in memory, from the
// context rows (checked against the session's head, as Context checks
// them) and the entries' nodes, which never change; verify re-derives every
// label from the parents themselves.

// sessionSummary is one session's context in summary.
type sessionSummary struct {
	mu    sync.Mutex
	ids   []string    // the context, in order (append only)
	nodes []*Node     // their nodes
	head  contextHead // the hash chain over ids
	// chains[k-1] is the chain after the first k entries: what a context
	// reference to them names (ContextRef), checked in O(1).
	chains [][32]byte
	// eff[k-1] and reach[k-1] are the positions of the entries the labels
	// of the prefix of length k come from.
	eff, reach []int32
	// flagged are the positions of the entries with an untrusted reach
	// tier (an untrusted effective tier implies one), in order.
	flagged []int32
}

// summaries holds the sessions' summaries, at most maxSummaries of them.
type summaries struct {
	mu sync.Mutex
	m  map[string]*sessionSummary
}

// maxSummaries bounds how many sessions are summarised at once; past it,
// some are dropped (and built again from the store when next used).
const maxSummaries = 4096

func (s *summaries) get(session string, create bool) *sessionSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.m[session]; ss != nil || !create {
		return ss
	}
	if s.m == nil {
		s.m = map[string]*sessionSummary{}
	}
	if len(s.m) >= maxSummaries {
		drop := maxSummaries / 8
		for k := range s.m {
			if drop <= 0 {
				break
			}
			delete(s.m, k)
			drop--
		}
	}
	ss := &sessionSummary{}
	s.m[session] = ss
	return ss
}

// add appends the context's next entry.
func (ss *sessionSummary) add(n *Node) {
	i := int32(len(ss.ids))
	e, r := i, i
	if i > 0 {
		if pe := ss.nodes[ss.eff[i-1]]; pe.Effective >= n.Effective {
			e = ss.eff[i-1]
		}
		if pr := ss.nodes[ss.reach[i-1]]; pr.Reach >= n.Reach {
			r = ss.reach[i-1]
		}
	}
	ss.ids = append(ss.ids, n.ID)
	ss.nodes = append(ss.nodes, n)
	ss.eff = append(ss.eff, e)
	ss.reach = append(ss.reach, r)
	if !n.Reach.Trusted() || !n.Effective.Trusted() {
		ss.flagged = append(ss.flagged, i)
	}
	ss.head = ss.head.add(n.ID)
	ss.chains = append(ss.chains, ss.head.chain)
}

// forget drops session's summary ss (its caller holds ss.mu): the next use
// builds it again from every row.
func (s *summaries) forget(session string, ss *sessionSummary) {
	ss.reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[session] == ss {
		delete(s.m, session)
	}
}

// reset forgets everything: the summary is built again from the store.
func (ss *sessionSummary) reset() {
	ss.ids, ss.nodes, ss.head, ss.chains, ss.eff, ss.reach, ss.flagged = nil, nil, contextHead{}, nil, nil, nil, nil
}

// contextIn returns session's context inside t (the graph's namespace of
// a read transaction), through its summary. A session summarised already
// reads only the rows past it; one that is not is read whole, every row
// under the session's prefix, so that a row added or a head removed behind
// the engine's back is refused, as it is without a summary. Either way the
// context must hash to the session's head. The slice returned is shared:
// callers must not modify it.
func (g *Graph) contextIn(t kv.Txn, session string) ([]string, error) {
	want, err := readHead(t, session)
	if err != nil {
		return nil, err
	}
	ss := g.summaries.get(session, false)
	if ss == nil {
		ids, err := g.contextRows(t, session, want)
		if err != nil || len(ids) == 0 {
			return nil, err
		}
		ss = g.summaries.get(session, true)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if len(ss.ids) == 0 {
			for _, id := range ids {
				n, err := g.node(t, id)
				if err != nil {
					g.summaries.forget(session, ss)
					return nil, fmt.Errorf("the context of session %s names %s: %w", session, id, err)
				}
				ss.add(n)
			}
		}
	} else {
		ss.mu.Lock()
		defer ss.mu.Unlock()
	}
	if ss.head.n > want.n {
		// A read transaction older than the summary (a check that began
		// before another's entry joined): its context is read whole and
		// checked against its own head, as without a summary. A head
		// edited to say less is caught by verify, as it is then.
		return g.contextRows(t, session, want)
	}
	for p := uint64(len(ss.ids)); p < want.n; p++ {
		id, err := t.Get(sessionKey(session, p))
		if err != nil {
			g.summaries.forget(session, ss)
			return nil, fmt.Errorf("the context of session %s has no entry at %d of %d: context rows were edited: %w", session, p, want.n, registry.ErrTampered)
		}
		n, err := g.node(t, string(id))
		if err != nil {
			g.summaries.forget(session, ss)
			return nil, fmt.Errorf("the context of session %s names %s: %w", session, id, err)
		}
		ss.add(n)
	}
	if ss.head != want {
		// Only this process writes the store, and a context only grows:
		// a head that differs from the summary's at its count was edited.
		got := ss.head
		g.summaries.forget(session, ss)
		return nil, fmt.Errorf("the context of session %s (%d entries) differs from its head (%d): context rows were edited: %w", session, got.n, want.n, registry.ErrTampered)
	}
	return ss.ids[:len(ss.ids):len(ss.ids)], nil
}

// contextRows reads every context row of session and checks them against
// its head, want.
func (g *Graph) contextRows(t kv.Txn, session string, want contextHead) ([]string, error) {
	var ids []string
	var got contextHead
	prefix := append(append([]byte(pSession), session...), 0)
	if err := t.Iterate(prefix, true, func(_, v []byte) error {
		ids = append(ids, string(v))
		got = got.add(string(v))
		return nil
	}); err != nil {
		return nil, err
	}
	if got != want {
		return nil, fmt.Errorf("the context of session %s (%d entries) differs from its head (%d): context rows were edited: %w", session, got.n, want.n, registry.ErrTampered)
	}
	return ids, nil
}

// Summary is what the summary of a session's context says of an entry's
// parents that are exactly a prefix of that context.
type Summary struct {
	// N is how many entries the prefix holds: all the parents.
	N int
	// Untrusted are the prefix's entries with an untrusted label, in
	// context order; every other entry of it is trusted on every path.
	Untrusted []string
	// eff and reach are the entries the prefix's labels come from.
	eff, reach *Node
}

// Summary returns the summary of st's parents when they are, in order, the
// first entries of st's session's context as it is summarised in memory,
// each a strong parent, or when st names such a prefix by reference and
// lists no other parent (the summary's chain at the prefix is the
// reference's head); else nil. It reads nothing from the store: the summary
// of a prefix depends on the prefix's entries alone, which never change.
func (g *Graph) Summary(st *Statement) *Summary {
	k := len(st.Parents)
	if st.Context != nil {
		if k > 0 {
			return nil
		}
		k = st.Context.N
	}
	if st.Session == "" || k == 0 {
		return nil
	}
	ss := g.summaries.get(st.Session, false)
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.ids) < k {
		return nil
	}
	if st.Context != nil {
		if headHex(ss.chains[k-1]) != st.Context.Head {
			return nil
		}
	} else {
		tau := g.reg.Tau()
		for i, p := range st.Parents {
			if p.ID != ss.ids[i] || p.Weight < tau {
				return nil
			}
		}
	}
	s := &Summary{N: k, eff: ss.nodes[ss.eff[k-1]], reach: ss.nodes[ss.reach[k-1]]}
	for _, i := range ss.flagged {
		if int(i) >= k {
			break
		}
		s.Untrusted = append(s.Untrusted, ss.ids[i])
	}
	return s
}

// labelSummarised is labelFrom for parents a summary covers: folding the
// prefix's summary into the entry's own tier is folding its entries one by
// one, since propagate keeps the first of the highest.
func (g *Graph) labelSummarised(st *Statement, id string, tier registry.Tier, s *Summary) *Node {
	n := &Node{
		ID: id, Principal: st.Principal, Kind: st.Kind, Session: st.Session, Tool: st.Tool, Time: st.Time,
		Tier: tier, Effective: tier, Reach: tier, NParents: len(st.Parents), Parents: st.Parents,
	}
	if !tier.Trusted() {
		n.EffectiveRoot, n.ReachRoot = id, id
	}
	if s.eff.Effective > n.Effective {
		n.Effective, n.EffectiveVia, n.EffectiveRoot = s.eff.Effective, s.eff.ID, s.eff.EffectiveRoot
	}
	if s.reach.Reach > n.Reach {
		n.Reach, n.ReachVia, n.ReachRoot = s.reach.Reach, s.reach.ID, s.reach.ReachRoot
	}
	return n
}
