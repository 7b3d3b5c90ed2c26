package lineage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// Graph is the derivation DAG, persisted in the store. Entries are
// immutable and a parent must exist before a child names it, so the graph is
// acyclic by construction and each entry's labels are computed once, at
// insert, from its parents alone.
//
// The graph keeps its rows in the kv.Store it is given (its own namespace).
// It reads through it; it writes only inside a transaction the engine
// assembles (Pending.Write, RecordRecall), because what it stores must be
// logged in the same commit, and the log is not the graph's.
type Graph struct {
	store kv.Store
	reg   *registry.Registry
	log   *slog.Logger
	cache *nodeCache
	// summaries are the sessions' contexts in summary (summary.go).
	summaries summaries
}

// New returns the graph kept in store, checked against reg.
func New(store kv.Store, reg *registry.Registry, log *slog.Logger) *Graph {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Graph{store: store, reg: reg, log: log, cache: newNodeCache(DefaultNodeCache)}
}

// Registry is the registry the graph checks entries against.
func (g *Graph) Registry() *registry.Registry { return g.reg }

// Strong reports whether an edge of weight w carries taint.
func (g *Graph) Strong(w float64) bool { return w >= g.reg.Tau() }

// Pending is a verified entry with its labels computed, not yet stored.
// Entries are immutable and never deleted, so labels computed from the
// parents before the write transaction are still right inside it.
type Pending struct {
	g         *Graph
	Statement *Statement
	Node      *Node
	env       []byte
	content   []byte
}

// Prepare verifies a signed entry against the frozen registry and computes
// its labels from its parents, storing nothing.
func (g *Graph) Prepare(ctx context.Context, env, content []byte) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, p, id, err := g.verify(env)
	if err != nil {
		return nil, err
	}
	return g.prepare(st, p, id, env, content)
}

// PrepareSigned is Prepare for an entry this process has just signed with
// an in-process Ed25519 key (Engine.Record, Engine.Check). Instead of
// decoding the envelope again and verifying the signature it has just made
// (a third of a record's CPU), it checks that the signing key is the one
// the frozen registry holds for the statement's principal: an Ed25519
// signature made by that key over the payload verifies. Envelopes from
// anywhere else (the server, files) go through Prepare.
func (g *Graph) PrepareSigned(ctx context.Context, s *Signed, content []byte) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s == nil || s.st == nil {
		return nil, fmt.Errorf("%w: not an entry made by SignStatement", ErrMalformed)
	}
	if len(s.env) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%w: envelope larger than %d bytes", ErrMalformed, MaxEnvelopeBytes)
	}
	if !g.reg.Frozen() {
		return nil, registry.ErrNotFrozen
	}
	p, ok := g.reg.Lookup(s.st.Principal)
	if !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, s.st.Principal)
	}
	if !p.PublicKey.Equal(s.key) {
		return nil, fmt.Errorf("entry signed as %s: %w: the signing key is not the one registered for %s", p.ID, registry.ErrBadSignature, p.ID)
	}
	return g.prepare(s.st, p, s.id, s.env, content)
}

func (g *Graph) prepare(st *Statement, p registry.Principal, id string, env, content []byte) (*Pending, error) {
	if content != nil {
		if len(content) > MaxContentBytes {
			return nil, fmt.Errorf("%w: content larger than %d bytes", ErrMalformed, MaxContentBytes)
		}
		if DigestContent(content) != st.ContentDigest {
			return nil, fmt.Errorf("%w: content does not match its signed digest", ErrMalformed)
		}
	}
	if (st.Kind == KindApproval || st.Kind == KindRejection) && p.Tier != registry.User {
		return nil, fmt.Errorf("%w: an entry of kind %s must be signed by a user-tier principal, %s is %s", ErrMalformed, st.Kind, p.ID, p.Tier)
	}
	n, st, err := g.labelCached(st, id, p.Tier)
	if err != nil {
		return nil, err
	}
	return &Pending{g: g, Statement: st, Node: n, env: env, content: content}, nil
}

// Envelope is the prepared entry's signed envelope.
func (p *Pending) Envelope() []byte { return p.env }

// Content is the content stored with the prepared entry (nil: none).
func (p *Pending) Content() []byte { return p.content }

// Size is a rough count of the bytes Write stores, for the committer.
func (p *Pending) Size() int { return len(p.env) + len(p.content) + 64*len(p.Statement.Parents) }

// Preview computes the labels a statement would get, without a signature
// and without storing anything: the gate's decision alone, for benchmarks
// and dry runs. Its principal must be registered.
func (g *Graph) Preview(st *Statement) (*Node, error) {
	p, ok := g.reg.Lookup(st.Principal)
	if !ok {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknownPrincipal, st.Principal)
	}
	payload, err := st.Encode()
	if err != nil {
		return nil, err
	}
	n, _, err := g.labelCached(st, IDOf(payload), p.Tier)
	return n, err
}

// verify decodes an envelope and checks its signature against the frozen
// registry: the only door into the graph.
func (g *Graph) verify(env []byte) (*Statement, registry.Principal, string, error) {
	st, payload, id, err := Open(env)
	if err != nil {
		return nil, registry.Principal{}, "", err
	}
	if !g.reg.Frozen() {
		return nil, registry.Principal{}, "", registry.ErrNotFrozen
	}
	p, err := g.checkSignature(st, payload, env)
	return st, p, id, err
}

// checkSignature checks that env carries a valid signature over payload by
// the key registered for the statement's principal.
func (g *Graph) checkSignature(st *Statement, payload, env []byte) (registry.Principal, error) {
	v, p, err := g.reg.Verifier(st.Principal)
	if err != nil {
		return p, err
	}
	signed, err := v.VerifyEnvelope(env, PayloadType)
	if err != nil {
		return p, fmt.Errorf("entry signed as %s: %w", st.Principal, err)
	}
	if !bytes.Equal(signed, payload) {
		return p, fmt.Errorf("%w: the signed payload differs from the decoded one", registry.ErrBadSignature)
	}
	return p, nil
}

// labelCached labels an entry from the node cache when every parent is
// there (the common case: parents are recent entries, and an insert puts
// its node in the cache), without a read transaction: on Badger a new read
// transaction waits for the commits in flight, fsync included, which cost
// each of eight writers 350 to 560 µs per record. A cached node is never
// stale: entries are immutable and only this process writes the store. The
// statement returned is st, or for one that names its context by reference
// a copy of it that carries its expanded parents (AllParents).
func (g *Graph) labelCached(st *Statement, id string, tier registry.Tier) (*Node, *Statement, error) {
	if st.Context != nil {
		return g.labelRefCached(st, id, tier)
	}
	n, err := g.labelListed(st, id, tier)
	return n, st, err
}

// labelListed is labelCached for a statement that lists all its parents.
func (g *Graph) labelListed(st *Statement, id string, tier registry.Tier) (*Node, error) {
	if s := g.Summary(st); s != nil {
		return g.labelSummarised(st, id, tier, s), nil
	}
	parents := make([]*Node, len(st.Parents))
	for i, par := range st.Parents {
		if parents[i] = g.cache.get(par.ID); parents[i] == nil {
			var n *Node
			err := g.store.View(func(t kv.Txn) error {
				var err error
				n, err = g.label(t, st, id, tier)
				return err
			})
			return n, err
		}
	}
	return g.labelFrom(st, id, tier, parents), nil
}

// label computes an entry's node from its parents' nodes.
func (g *Graph) label(t kv.Txn, st *Statement, id string, tier registry.Tier) (*Node, error) {
	parents := make([]*Node, len(st.Parents))
	for i, par := range st.Parents {
		pn, err := g.node(t, par.ID)
		if errors.Is(err, ErrUnknownEntry) {
			return nil, fmt.Errorf("%w %s", ErrUnknownParent, par.ID)
		}
		if err != nil {
			return nil, err
		}
		parents[i] = pn
	}
	return g.labelFrom(st, id, tier, parents), nil
}

// labelFrom is the entry's node given its parents' nodes, in the order of
// st.Parents.
func (g *Graph) labelFrom(st *Statement, id string, tier registry.Tier, parents []*Node) *Node {
	n := &Node{
		ID: id, Principal: st.Principal, Kind: st.Kind, Session: st.Session, Tool: st.Tool, Time: st.Time,
		Tier: tier, Effective: tier, Reach: tier, NParents: len(st.Parents), Parents: st.Parents,
	}
	if !tier.Trusted() {
		n.EffectiveRoot, n.ReachRoot = id, id
	}
	for i, par := range st.Parents {
		propagate(n, parents[i], par.Weight, g.reg.Tau())
	}
	return n
}

// Stored returns the node of the prepared entry when it is already stored
// (inside t, the graph's namespace of the transaction that would write it),
// else nil.
func (p *Pending) Stored(t kv.Txn) (*Node, error) {
	b, err := t.Get(key(pNode, p.Node.ID))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeNode(b)
}

// Write stores the prepared entry inside t (the graph's namespace of the
// caller's transaction, which logs it in the same commit) with its append
// sequence seq (its log leaf's index + 1). The caller checks Stored first:
// an entry is written once.
func (p *Pending) Write(t kv.Txn, seq uint64) error {
	id := p.Node.ID
	p.Node.Seq = seq
	if err := t.Set(key(pEnvelope, id), p.env); err != nil {
		return err
	}
	if err := t.Set(key(pNode, id), encodeNode(p.Node)); err != nil {
		return err
	}
	if p.content != nil {
		if err := t.Set(key(pContent, id), p.content); err != nil {
			return err
		}
	}
	if err := t.Set(seqKey(seq), []byte(id)); err != nil {
		return err
	}
	if err := indexContent(t, p.Statement, id); err != nil {
		return err
	}
	if err := indexPlanCall(t, p.Statement, id); err != nil {
		return err
	}
	// A session's context is what the agent has read there: calls are
	// what it did (their results come back as tool output, which is in
	// the context) and approvals and rejections are for the gate, so none
	// joins it.
	if st := p.Statement; joinsContext(st) {
		return addToContext(t, st.Session, id)
	}
	return nil
}

// Committed tells the graph that the transaction holding Write committed:
// the new node goes into the cache, since the next check will read it.
func (p *Pending) Committed() {
	p.g.cache.put(p.Node)
	p.g.log.Debug("entry recorded", "id", p.Node.ID, "principal", p.Node.Principal, "effective_tier", p.Node.Effective.String())
}

func joinsContext(st *Statement) bool {
	return st.Session != "" && st.Kind != KindApproval && st.Kind != KindRejection && st.Kind != KindCall
}

// propagate folds one parent into a child's labels: max-of-strong-edges for
// the effective tier, max over every edge for the reach tier. A tie keeps
// the earlier witness, so labels do not depend on anything but the parents.
func propagate(child, parent *Node, weight, tau float64) {
	if weight >= tau && parent.Effective > child.Effective {
		child.Effective = parent.Effective
		child.EffectiveVia = parent.ID
		child.EffectiveRoot = parent.EffectiveRoot
	}
	if parent.Reach > child.Reach {
		child.Reach = parent.Reach
		child.ReachVia = parent.ID
		child.ReachRoot = parent.ReachRoot
	}
}

// addToContext appends id to session's context, unless it is there
// already. Its row is keyed by its position in the context (the head's
// count), so that the entries of one recall, logged at one sequence, each
// get their own row, in order.
func addToContext(t kv.Txn, session, id string) error {
	mk := memberKey(session, id)
	if ok, err := t.Has(mk); err != nil || ok {
		return err
	}
	head, err := readHead(t, session)
	if err != nil {
		return err
	}
	if err := t.Set(mk, nil); err != nil {
		return err
	}
	if err := t.Set(sessionKey(session, head.n), []byte(id)); err != nil {
		return err
	}
	return t.Set(headKey(session), head.add(id).encode())
}

// contextHead is a session's context in brief: how many entries it holds
// and a hash chain over them in order. Reading a context checks it, so a
// context row deleted or changed behind the engine's back is refused at use
// instead of quietly dropping an untrusted entry from a default
// justification; verify re-derives the whole context from signed and logged
// data, so a head rewritten to match is caught there.
type contextHead struct {
	n     uint64
	chain [32]byte
}

func (h contextHead) add(id string) contextHead {
	s := sha256.New()
	s.Write(h.chain[:])
	s.Write([]byte(id))
	h.n++
	copy(h.chain[:], s.Sum(nil))
	return h
}

func (h contextHead) encode() []byte {
	return append(binary.BigEndian.AppendUint64(nil, h.n), h.chain[:]...)
}

func readHead(t kv.Txn, session string) (contextHead, error) {
	var h contextHead
	b, err := t.Get(headKey(session))
	if errors.Is(err, kv.ErrNotFound) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	if len(b) != 40 {
		return h, fmt.Errorf("the context head of session %s is malformed: %w", session, registry.ErrTampered)
	}
	h.n = binary.BigEndian.Uint64(b)
	copy(h.chain[:], b[8:])
	return h, nil
}

func headKey(session string) []byte { return append([]byte(pHead), session...) }

// Recall is a recall record: entries put into a session's context at a
// time. Its ID is the hash of its canonical form; the engine logs it.
type Recall struct {
	Session string   `json:"session"`
	IDs     []string `json:"ids"`
	Time    string   `json:"time"`
}

// RecallID is a recall record's ID.
func (r *Recall) RecallID() string {
	b, _ := json.Marshal(r)
	s := sha256.Sum256(append([]byte("pedigree-recall-v1\x00"), b...))
	return hex.EncodeToString(s[:])
}

// Validate checks a recall's shape.
func (r *Recall) Validate() error {
	if r.Session == "" || len(r.Session) > MaxSessionLen || !sessionPat.MatchString(r.Session) {
		return fmt.Errorf("%w: session %q", ErrMalformed, r.Session)
	}
	if len(r.IDs) == 0 || len(r.IDs) > MaxParents {
		return fmt.Errorf("%w: a recall names 1 to %d entries, not %d", ErrMalformed, MaxParents, len(r.IDs))
	}
	for _, id := range r.IDs {
		if !IsID(id) {
			return fmt.Errorf("%w: recall of %q, not a full entry ID", ErrMalformed, id)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
		return fmt.Errorf("%w: recall time %q", ErrMalformed, r.Time)
	}
	return nil
}

// RecallStored reports inside t whether the recall record is stored.
func (g *Graph) RecallStored(t kv.Txn, r *Recall) (bool, error) {
	return t.Has(key(pRecall, r.RecallID()))
}

// RecordRecall puts stored entries into a session's context inside t (the
// graph's namespace of the transaction that logs the recall), so that
// what the agent writes there next derives from them: this is how taint
// crosses sessions through memory. Entries already in the context are left
// as they are. The record itself is kept, so verify can re-derive contexts.
func (g *Graph) RecordRecall(t kv.Txn, r *Recall) error {
	if err := r.Validate(); err != nil {
		return err
	}
	for _, id := range r.IDs {
		if ok, err := t.Has(key(pNode, id)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w %s", ErrUnknownEntry, id)
		}
	}
	b, _ := json.Marshal(r)
	if err := t.Set(key(pRecall, r.RecallID()), b); err != nil {
		return err
	}
	for _, id := range r.IDs {
		if err := addToContext(t, r.Session, id); err != nil {
			return err
		}
	}
	return nil
}

// Context returns a session's context: every entry recorded in it or
// recalled into it, in order.
//
// It refuses (with an error wrapping registry.ErrTampered) a context whose
// rows do not hash to the session's head: a check never runs on a context
// that rows deleted behind the engine's back have shrunk.
func (g *Graph) Context(ctx context.Context, session string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ids []string
	err := g.store.View(func(t kv.Txn) error {
		var err error
		ids, err = g.contextIn(t, session)
		return err
	})
	return slices.Clone(ids), err
}

// Node returns the node of a full entry ID.
func (g *Graph) Node(id string) (*Node, error) {
	var n *Node
	err := g.store.View(func(t kv.Txn) error {
		var err error
		n, err = g.node(t, id)
		return err
	})
	return n, err
}

// node reads a node through the cache. The returned node is shared: callers
// must not modify it.
func (g *Graph) node(t kv.Txn, id string) (*Node, error) {
	if n := g.cache.get(id); n != nil {
		return n, nil
	}
	b, err := t.Get(key(pNode, id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("%w %s", ErrUnknownEntry, id)
	}
	if err != nil {
		return nil, err
	}
	n, err := decodeNode(b)
	if err != nil {
		return nil, fmt.Errorf("entry %s: %w", id, err)
	}
	g.cache.put(n)
	return n, nil
}

// Nodes returns the nodes of several full IDs in one read transaction.
func (g *Graph) Nodes(ids []string) ([]*Node, error) {
	var out []*Node
	err := g.store.View(func(t kv.Txn) error {
		var err error
		out, err = g.NodesIn(t, ids)
		return err
	})
	return out, err
}

// NodesIn is Nodes inside t, the graph's namespace of a read transaction
// the caller holds (one read transaction for everything a decision reads).
func (g *Graph) NodesIn(t kv.Txn, ids []string) ([]*Node, error) {
	out := make([]*Node, len(ids))
	for i, id := range ids {
		n, err := g.node(t, id)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// Envelope returns the stored envelope and content (nil when none was stored).
func (g *Graph) Envelope(id string) (env, content []byte, err error) {
	err = g.store.View(func(t kv.Txn) error {
		env, err = t.Get(key(pEnvelope, id))
		if errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("%w %s", ErrUnknownEntry, id)
		}
		if err != nil {
			return err
		}
		content, err = t.Get(key(pContent, id))
		if errors.Is(err, kv.ErrNotFound) {
			content, err = nil, nil
		}
		return err
	})
	return env, content, err
}

// Parents returns the parent edges of id, in the signed statement's order.
func (g *Graph) Parents(id string) ([]Edge, error) {
	var out []Edge
	err := g.store.View(func(t kv.Txn) error {
		var err error
		out, err = g.parents(t, id)
		return err
	})
	return out, err
}

// parents reads the edges from the child's node row: one read (usually a
// cache hit) where iterating edge keys opened an iterator over every level.
func (g *Graph) parents(t kv.Txn, id string) ([]Edge, error) {
	n, err := g.node(t, id)
	if err != nil {
		return nil, err
	}
	return g.edgesIn(t, n)
}

// Edges are all of n's parent edges, in the signed statement's order: the
// context entries it names by reference (read from the context rows and
// checked against the reference) before the ones it lists.
func (g *Graph) Edges(n *Node) ([]Edge, error) {
	if n.Context == nil {
		return n.Edges(g.reg.Tau()), nil
	}
	var out []Edge
	err := g.store.View(func(t kv.Txn) error {
		var err error
		out, err = g.edgesIn(t, n)
		return err
	})
	return out, err
}

// Resolve turns an ID or a unique prefix of at least MinPrefix hex
// characters into a full ID.
func (g *Graph) Resolve(prefix string) (string, error) {
	if len(prefix) < MinPrefix || len(prefix) > 64 || !isLowerHex(prefix) {
		return "", fmt.Errorf("%w: %q is not an entry ID (at least %d lowercase hex characters)", ErrMalformed, prefix, MinPrefix)
	}
	var found []string
	err := g.store.View(func(t kv.Txn) error {
		if len(prefix) == 64 {
			if ok, err := t.Has(key(pNode, prefix)); err != nil || !ok {
				return err
			}
			found = append(found, prefix)
			return nil
		}
		return t.Iterate(key(pNode, prefix), false, func(k, _ []byte) error {
			found = append(found, string(k[len(pNode):]))
			if len(found) > 1 {
				return kv.ErrStop
			}
			return nil
		})
	})
	switch {
	case err != nil:
		return "", err
	case len(found) == 0:
		return "", fmt.Errorf("%w %s", ErrUnknownEntry, prefix)
	case len(found) > 1:
		return "", fmt.Errorf("%w %s", ErrAmbiguous, prefix)
	}
	return found[0], nil
}

// IsID reports whether s is a full entry ID: 64 lowercase hex characters
// (also the form of the other sha256 digests entries carry).
func IsID(s string) bool { return len(s) == 64 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ApprovalIn reads a stored approval entry inside t and verifies its
// envelope against the frozen registry: what a check may rely on. Any index
// that points at it is a hint; this is the evidence.
func (g *Graph) ApprovalIn(t kv.Txn, id string) (*Statement, registry.Principal, error) {
	env, err := t.Get(key(pEnvelope, id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, registry.Principal{}, fmt.Errorf("%w %s", ErrUnknownEntry, id)
	}
	if err != nil {
		return nil, registry.Principal{}, err
	}
	st, p, gotID, err := g.verify(env)
	if err != nil {
		return nil, p, err
	}
	if gotID != id || st.Kind != KindApproval {
		return nil, p, fmt.Errorf("%w: entry %s is not the approval it is stored as", ErrMalformed, id)
	}
	return st, p, nil
}

// VerifyEntrySignature checks a stored envelope's signature against the
// registry, without storing anything.
func (g *Graph) VerifyEntrySignature(env []byte) error {
	_, _, _, err := g.verify(env)
	return err
}

// OpenVerified decodes an envelope and verifies its signature against the
// frozen registry, returning the statement and the entry's ID (the hash of
// the signed bytes). For stored envelopes that a decision rests on (an
// approval): a row in the store proves nothing until it verifies.
func (g *Graph) OpenVerified(env []byte) (*Statement, string, error) {
	st, _, id, err := g.verify(env)
	return st, id, err
}

// Count counts stored entries, stopping at limit (0: no limit).
func (g *Graph) Count(limit int) (int, error) {
	n := 0
	err := g.store.View(func(t kv.Txn) error {
		return t.Iterate([]byte(pSeq), false, func(_, _ []byte) error {
			n++
			if limit > 0 && n >= limit {
				return kv.ErrStop
			}
			return nil
		})
	})
	return n, err
}

// UnsafeSetSeq rewrites, inside t (the graph's namespace), the append
// sequence of a stored entry: its node row and its place in the append
// order. It is what a writer of the directory does when it rebuilds the
// log without some leaf (testkit/tampertest), and is not a stable API.
func UnsafeSetSeq(t kv.Txn, id string, seq uint64) error {
	b, err := t.Get(key(pNode, id))
	if err != nil {
		return err
	}
	n, err := decodeNode(b)
	if err != nil {
		return err
	}
	n.Seq = seq
	if err := t.Set(key(pNode, id), encodeNode(n)); err != nil {
		return err
	}
	return t.Set(seqKey(seq), []byte(id))
}
