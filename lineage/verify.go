package lineage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// Problem is one thing wrong in the store.
type Problem struct {
	ID   string `json:"id"`
	What string `json:"what"`
}

// Report is the result of Verify.
type Report struct {
	Entries  int       `json:"entries"`
	Problems []Problem `json:"problems"`
	// TrustRoot is how the store's registry is anchored outside it ("pinned
	// key", "pinned digest" or "none"), filled in by the engine, which knows.
	TrustRoot string `json:"trust_root,omitempty"`
	// LogSize is the number of leaves in the log, and Witnessed the
	// largest size a checkpoint kept elsewhere vouches for: the leaves
	// after it are the unwitnessed tail, which only a later checkpoint
	// protects from being cut.
	LogSize   uint64 `json:"log_size"`
	Witnessed uint64 `json:"witnessed"`
}

// OK reports whether nothing was found wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Verified is what VerifyIn found intact: each entry that verifies, by ID,
// with its append sequence, and each recall record, by ID, with its
// session. The engine checks them against the log's leaves.
type Verified struct {
	Entries map[string]uint64
	Recalls map[string]string
	// joins are, per session, the verified entries that join its context
	// by being recorded there, in append order; recalled are the entries
	// each verified recall record puts into its session. With the recall
	// records' log positions they give every context's order
	// (VerifyContextOrder).
	joins    map[string][]string
	recalled map[string][]string
}

// VerifyIn walks the graph's rows inside t (its namespace of one read
// transaction) in append order and checks each entry's signature against
// the frozen registry, its ID against its bytes, its node row against its
// signed statement, its parents' order, and its stored labels against a
// recomputation from its parents; then it re-derives every session's context
// from the entries' signed sessions and the recall records and compares it
// with the stored context rows. What it finds wrong goes to bad; an error
// means it could not check.
func (g *Graph) VerifyIn(ctx context.Context, t kv.Txn, bad func(id, f string, a ...any)) (*Verified, error) {
	v := &Verified{Entries: map[string]uint64{}, Recalls: map[string]string{}, joins: map[string][]string{}, recalled: map[string][]string{}}
	if !g.reg.Frozen() {
		bad("", "the registry is not frozen")
	}
	stmts := map[string]*Statement{}
	nodes := map[string]*Node{}
	rows := &contextRows{t: t, ids: map[string][]string{}, chains: map[string][][32]byte{}}
	err := t.Iterate([]byte(pSeq), true, func(k, val []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		seq := binary.BigEndian.Uint64(k[len(pSeq):])
		id := string(val)
		if st, n := g.verifyEntry(t, id, seq, nodes, rows, bad); st != nil {
			v.Entries[id] = seq
			stmts[id], nodes[id] = st, n
			if joinsContext(st) {
				v.joins[st.Session] = append(v.joins[st.Session], id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Rows that no sequence key accounts for: entries smuggled in beside
	// the log.
	for _, p := range []string{pNode, pEnvelope, pContent} {
		if err := t.Iterate([]byte(p), false, func(k, _ []byte) error {
			if id := string(k[len(p):]); v.Entries[id] == 0 {
				bad(id, "%s row of an entry that is not in the append order", map[string]string{pNode: "node", pEnvelope: "envelope", pContent: "content"}[p])
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := g.verifyContexts(ctx, t, v, stmts, bad); err != nil {
		return nil, err
	}
	if err := verifyContentIndex(ctx, t, stmts, bad); err != nil {
		return nil, err
	}
	if err := verifyPlanCallIndex(ctx, t, stmts, bad); err != nil {
		return nil, err
	}
	return v, nil
}

// verifyContexts re-derives every session's context: an entry joins its
// signed session at its own sequence, a recall record adds its entries at
// the sequence its session rows carry. Every stored context row must be so
// derived, and every derived membership must be stored.
func (g *Graph) verifyContexts(ctx context.Context, t kv.Txn, v *Verified, stmts map[string]*Statement, bad func(id, f string, a ...any)) error {
	// want: session -> entry -> the sequences that may have added it.
	want := map[string]map[string]bool{}
	add := func(session, id string) {
		if want[session] == nil {
			want[session] = map[string]bool{}
		}
		want[session][id] = true
	}
	for id, st := range stmts {
		if joinsContext(st) {
			add(st.Session, id)
		}
	}
	if err := t.Iterate([]byte(pRecall), true, func(k, val []byte) error {
		id := string(k[len(pRecall):])
		var r Recall
		if err := json.Unmarshal(val, &r); err != nil || r.Validate() != nil || r.RecallID() != id {
			bad(id, "recall record does not decode or does not hash to its ID")
			return nil
		}
		v.Recalls[id] = r.Session
		v.recalled[id] = r.IDs
		for _, e := range r.IDs {
			if v.Entries[e] == 0 {
				bad(id, "recall of %s, which is not a verified entry", e)
			}
			add(r.Session, e)
		}
		return nil
	}); err != nil {
		return err
	}
	got := map[string]map[string]bool{}
	chains := map[string]contextHead{}
	if err := t.Iterate([]byte(pSession), true, func(k, val []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A session name holds no 0 byte: the first one ends it.
		name, n, ok := bytes.Cut(k[len(pSession):], []byte{0})
		if !ok || len(n) != 8 {
			bad("", "malformed session context row")
			return nil
		}
		session, id := string(name), string(val)
		if !want[session][id] {
			bad(id, "context row of session %s that no entry or recall accounts for", session)
		}
		if got[session] == nil {
			got[session] = map[string]bool{}
		}
		got[session][id] = true
		chains[session] = chains[session].add(id)
		if ok, err := t.Has(memberKey(session, id)); err != nil {
			return err
		} else if !ok {
			bad(id, "context membership row of session %s is missing", session)
		}
		return nil
	}); err != nil {
		return err
	}
	for session, ids := range want {
		for id := range ids {
			if !got[session][id] {
				bad(id, "missing from the context of session %s", session)
			}
		}
	}
	heads := map[string]bool{}
	if err := t.Iterate([]byte(pHead), true, func(k, val []byte) error {
		session := string(k[len(pHead):])
		heads[session] = true
		h, err := readHead(t, session)
		if err != nil || h != chains[session] {
			bad("", "the context head of session %s does not match its context rows", session)
		}
		return nil
	}); err != nil {
		return err
	}
	for session := range chains {
		if !heads[session] {
			bad("", "session %s has context rows but no context head", session)
		}
	}
	return t.Iterate([]byte(pMember), false, func(k, _ []byte) error {
		name, member, ok := bytes.Cut(k[len(pMember):], []byte{0})
		if !ok || !IsID(string(member)) {
			bad("", "malformed context membership row")
			return nil
		}
		session, id := string(name), string(member)
		if !got[session][id] {
			bad(id, "context membership row of session %s without its context row", session)
		}
		return nil
	})
}

// verifyEntry checks one entry against nodes, the entries found before it
// in the append order, and returns its statement and node when it is there
// at all (its envelope decodes to its ID and its node row decodes), so that
// its children can name it.
func (g *Graph) verifyEntry(t kv.Txn, id string, seq uint64, nodes map[string]*Node, rows *contextRows, bad func(string, string, ...any)) (*Statement, *Node) {
	env, err := t.Get(key(pEnvelope, id))
	if err != nil {
		bad(id, "envelope missing: %v", err)
		return nil, nil
	}
	st, payload, gotID, err := Open(env)
	if err != nil {
		bad(id, "envelope does not decode: %v", err)
		return nil, nil
	}
	if gotID != id {
		bad(id, "stored under an ID that is not the hash of its bytes (%s)", gotID)
		return nil, nil
	}
	p, err := g.checkSignature(st, payload, env)
	if errors.Is(err, registry.ErrUnknownPrincipal) {
		bad(id, "signed by %s: %v", st.Principal, err)
		return nil, nil
	}
	if err != nil {
		bad(id, "signature by %s does not verify", st.Principal)
		return nil, nil
	}
	if c, err := t.Get(key(pContent, id)); err == nil && DigestContent(c) != st.ContentDigest {
		bad(id, "stored content does not match its signed digest")
	}
	nb, err := t.Get(key(pNode, id))
	if err != nil {
		bad(id, "node row missing")
		return nil, nil
	}
	n, err := decodeNode(nb)
	if err != nil {
		bad(id, "node row does not decode: %v", err)
		return nil, nil
	}
	if n.Seq != seq {
		bad(id, "node says sequence %d, the append log %d", n.Seq, seq)
	}
	if n.ID != id {
		bad(id, "node row names entry %s", n.ID)
	}
	if n.Principal != st.Principal || n.Kind != st.Kind || n.Session != st.Session || n.Tool != st.Tool || n.Time != st.Time {
		bad(id, "node row disagrees with the signed statement")
	}
	if n.Tier != p.Tier {
		bad(id, "stored tier %s, but %s is %s", n.Tier, p.ID, p.Tier)
	}
	want := Node{ID: id, Tier: p.Tier, Effective: p.Tier, Reach: p.Tier}
	if !p.Tier.Trusted() {
		want.EffectiveRoot, want.ReachRoot = id, id
	}
	if !slices.Equal(n.Parents, st.Parents) {
		bad(id, "node row lists other parents or weights than the signed statement")
	}
	if !sameRef(n.Context, st.Context) {
		bad(id, "node row names another context reference than the signed statement")
	}
	if st.Context != nil {
		g.verifyRef(id, st, nodes, rows, &want, bad)
	}
	for _, par := range st.Parents {
		pn, ok := nodes[par.ID]
		if !ok {
			bad(id, "parent %s is missing or was not written before its child", par.ID)
			continue
		}
		propagate(&want, pn, par.Weight, g.reg.Tau())
	}
	if n.Effective != want.Effective || n.Reach != want.Reach ||
		n.EffectiveVia != want.EffectiveVia || n.ReachVia != want.ReachVia ||
		n.EffectiveRoot != want.EffectiveRoot || n.ReachRoot != want.ReachRoot {
		bad(id, "stored labels (effective %s, reach %s) differ from a recomputation (effective %s, reach %s)",
			n.Effective, n.Reach, want.Effective, want.Reach)
	}
	return st, n
}

// contextRows are the stored context rows of each session, read once per
// session as verify needs them, with the chain after each row.
type contextRows struct {
	t      kv.Txn
	ids    map[string][]string
	chains map[string][][32]byte
}

func (c *contextRows) of(session string) ([]string, [][32]byte, error) {
	if ids, ok := c.ids[session]; ok {
		return ids, c.chains[session], nil
	}
	var ids []string
	var chains [][32]byte
	var h contextHead
	prefix := append(append([]byte(pSession), session...), 0)
	if err := c.t.Iterate(prefix, true, func(_, v []byte) error {
		ids = append(ids, string(v))
		h = h.add(string(v))
		chains = append(chains, h.chain)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	c.ids[session], c.chains[session] = ids, chains
	return ids, chains, nil
}

// verifyRef checks the context reference of a version 2 entry against the
// stored context rows of its session (whose derivation from the log
// verifyContexts and VerifyContextOrder check) and folds the prefix it
// names into want, the recomputation of the entry's labels: a context row
// dropped, added, renamed or swapped before the reference's end is reported
// on every entry that rests on it.
func (g *Graph) verifyRef(id string, st *Statement, nodes map[string]*Node, rows *contextRows, want *Node, bad func(string, string, ...any)) {
	ids, chains, err := rows.of(st.Session)
	k := st.Context.N
	switch {
	case err != nil:
		bad(id, "the context rows of session %s cannot be read: %v", st.Session, err)
		return
	case len(ids) < k:
		bad(id, "names the first %d entries of the context of session %s by reference, which holds %d rows", k, st.Session, len(ids))
		return
	case headHex(chains[k-1]) != st.Context.Head:
		bad(id, "the first %d context rows of session %s do not hash to the entry's context reference: context rows were edited", k, st.Session)
		return
	}
	listed := make(map[string]bool, len(st.Parents))
	for _, par := range st.Parents {
		listed[par.ID] = true
	}
	for _, pid := range ids[:k] {
		if listed[pid] {
			bad(id, "lists %s, which its context reference names already", pid)
		}
		pn, ok := nodes[pid]
		if !ok {
			bad(id, "context entry %s is missing or was not written before the entry that names it", pid)
			continue
		}
		propagate(want, pn, 1, g.reg.Tau())
	}
}

// VerifyContextOrder checks that every session's context rows are in the
// order the log gives their entries: an entry recorded in the session joins
// at its own sequence, a recall record's entries join, in the record's
// order, at the recall's sequence (recallSeq: each logged recall record's
// leaf index + 1, which only the log knows), and an entry already in the
// context is not added again. VerifyIn compares the rows with the derived
// context as a set; this compares the order, which the context's head (a
// hash chain over the rows, unsigned) cannot vouch for, since whoever can
// swap two rows can rewrite the head. A session whose rows differ as a set,
// or one with a recall the log does not hold, is left to the problems
// VerifyIn and the log check report. v is VerifyIn's result over t.
func (g *Graph) VerifyContextOrder(ctx context.Context, t kv.Txn, v *Verified, recallSeq map[string]uint64, bad func(id, f string, a ...any)) error {
	type event struct {
		seq uint64
		ids []string
	}
	events := map[string][]event{}
	for session, ids := range v.joins {
		for _, id := range ids {
			events[session] = append(events[session], event{v.Entries[id], []string{id}})
		}
	}
	skip := map[string]bool{}
	for id, session := range v.Recalls {
		seq, ok := recallSeq[id]
		if !ok {
			skip[session] = true
			continue
		}
		events[session] = append(events[session], event{seq, v.recalled[id]})
	}
	for session, evs := range events {
		if err := ctx.Err(); err != nil {
			return err
		}
		if skip[session] {
			continue
		}
		slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.seq, b.seq) })
		var want []string
		in := map[string]bool{}
		for _, e := range evs {
			for _, id := range e.ids {
				if !in[id] {
					in[id] = true
					want = append(want, id)
				}
			}
		}
		var got []string
		prefix := append(append([]byte(pSession), session...), 0)
		if err := t.Iterate(prefix, true, func(_, val []byte) error {
			got = append(got, string(val))
			return nil
		}); err != nil {
			return err
		}
		if !sameSet(got, in) {
			continue // VerifyIn names what is missing or extra
		}
		for i := range got {
			if got[i] != want[i] {
				bad(got[i], "context row %d of session %s names this entry, the log's order puts %s there: context rows were reordered", i, session, want[i])
				break
			}
		}
	}
	return nil
}

// sameSet reports whether ids, with no ID twice, are exactly the set in.
func sameSet(ids []string, in map[string]bool) bool {
	if len(ids) != len(in) {
		return false
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !in[id] || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}
