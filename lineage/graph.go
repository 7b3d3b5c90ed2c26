package lineage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/registry"
)

// Graph is the derivation DAG, persisted in the store. Entries are
// immutable and a parent must exist before a child names it, so the graph is
// acyclic by construction and each entry's labels are computed once, at
// insert, from its parents alone.
type Graph struct {
	db        *store.DB
	reg       *registry.Registry
	log       *slog.Logger
	cache     *nodeCache
	committer *committer
}

// New returns the graph over db, checked against reg.
func New(db *store.DB, reg *registry.Registry, log *slog.Logger) *Graph {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Graph{db: db, reg: reg, log: log, cache: newNodeCache(DefaultNodeCache), committer: newCommitter(db)}
}

// Close stops the committer after answering every insert handed to it. The
// store itself is closed by its owner.
func (g *Graph) Close() { g.committer.close() }

// Registry is the registry the graph checks entries against.
func (g *Graph) Registry() *registry.Registry { return g.reg }

// Strong reports whether an edge of weight w carries taint.
func (g *Graph) Strong(w float64) bool { return w >= g.reg.Tau() }

// Insert verifies a signed entry and stores it with its labels, edges and
// session membership, all in one transaction. Nothing is stored when any
// check fails. Inserting an entry that is already stored returns it.
func (g *Graph) Insert(ctx context.Context, env, content []byte) (*Node, error) {
	p, err := g.Prepare(ctx, env, content)
	if err != nil {
		return nil, err
	}
	return g.insert(ctx, p)
}

func (g *Graph) insert(ctx context.Context, p *Pending) (*Node, error) {
	if err := g.committer.commit(ctx, p.Write, len(p.env)+len(p.content)+64*len(p.Statement.Parents)); err != nil {
		return nil, err
	}
	if p.existing != nil {
		return p.existing, nil
	}
	g.log.Debug("entry recorded", "id", p.Node.ID, "principal", p.Node.Principal, "effective_tier", p.Node.Effective.String())
	return p.Node, nil
}

// Pending is a verified entry with its labels computed, not yet stored.
// Entries are immutable and never deleted, so labels computed from the
// parents before the write transaction are still right inside it.
type Pending struct {
	g         *Graph
	Statement *Statement
	Node      *Node
	env       []byte
	content   []byte
	existing  *Node
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
	if !bytes.Equal(s.key, p.PublicKey) {
		return nil, fmt.Errorf("entry signed as %s: %w: the signing key is not the one registered for %s", p.ID, registry.ErrBadSignature, p.ID)
	}
	return g.prepare(s.st, p, s.id, s.env, content)
}

// InsertSigned is Insert for an entry this process has just signed (see
// PrepareSigned).
func (g *Graph) InsertSigned(ctx context.Context, s *Signed, content []byte) (*Node, error) {
	p, err := g.PrepareSigned(ctx, s, content)
	if err != nil {
		return nil, err
	}
	return g.insert(ctx, p)
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
	if st.Kind == KindApproval && p.Tier != registry.User {
		return nil, fmt.Errorf("%w: an approval must be signed by a user-tier principal, %s is %s", ErrMalformed, p.ID, p.Tier)
	}
	var n *Node
	err := g.db.View(func(t *store.Txn) error {
		var err error
		n, err = g.label(t, st, id, p.Tier)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Pending{g: g, Statement: st, Node: n, env: env, content: content}, nil
}

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
	var n *Node
	err = g.db.View(func(t *store.Txn) error {
		n, err = g.label(t, st, IDOf(payload), p.Tier)
		return err
	})
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

// label computes an entry's node from its parents' nodes.
func (g *Graph) label(t *store.Txn, st *Statement, id string, tier registry.Tier) (*Node, error) {
	n := &Node{
		ID: id, Principal: st.Principal, Kind: st.Kind, Session: st.Session, Tool: st.Tool, Time: st.Time,
		Tier: tier, Effective: tier, Reach: tier, NParents: len(st.Parents), Parents: st.Parents,
	}
	if !tier.Trusted() {
		n.EffectiveRoot, n.ReachRoot = id, id
	}
	for _, par := range st.Parents {
		pn, err := g.node(t, par.ID)
		if errors.Is(err, ErrUnknownEntry) {
			return nil, fmt.Errorf("%w %s", ErrUnknownParent, par.ID)
		}
		if err != nil {
			return nil, err
		}
		propagate(n, pn, par.Weight, g.reg.Tau())
	}
	return n, nil
}

// Write stores the prepared entry inside t (the caller's transaction, which
// may carry other writes that must commit with it). An entry already stored
// is left as it is.
func (p *Pending) Write(t *store.Txn) error {
	p.existing = nil
	id := p.Node.ID
	if b, err := t.Get(key(pNode, id)); err == nil {
		p.existing, err = decodeNode(b)
		return err
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	seq, err := p.g.db.NextSeq()
	if err != nil {
		return err
	}
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
	if _, err := appendLeaf(t, LeafEntry, id); err != nil {
		return err
	}
	// A session's context is what the agent has read there: calls are
	// what it did (their results come back as tool output, which is in
	// the context) and approvals are for the gate, so neither joins it.
	if st := p.Statement; st.Session != "" && st.Kind != KindApproval && st.Kind != KindCall {
		return addToContext(t, st.Session, id, seq)
	}
	return nil
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

func addToContext(t *store.Txn, session, id string, seq uint64) error {
	mk := memberKey(session, id)
	if ok, err := t.Has(mk); err != nil || ok {
		return err
	}
	if err := t.Set(mk, nil); err != nil {
		return err
	}
	return t.Set(sessionKey(session, seq), []byte(id))
}

// Recall puts stored entries into a session's context, so that what the
// agent writes there next derives from them: this is how taint crosses
// sessions through memory. Entries already in the context are left as they are.
func (g *Graph) Recall(ctx context.Context, session string, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if session == "" || len(session) > MaxSessionLen || !sessionPat.MatchString(session) {
		return fmt.Errorf("%w: session %q", ErrMalformed, session)
	}
	return g.db.Update(func(t *store.Txn) error {
		for _, id := range ids {
			if ok, err := t.Has(key(pNode, id)); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w %s", ErrUnknownEntry, id)
			}
			seq, err := g.db.NextSeq()
			if err != nil {
				return err
			}
			if err := addToContext(t, session, id, seq); err != nil {
				return err
			}
		}
		return nil
	})
}

// Context returns a session's context: every entry recorded in it or
// recalled into it, in order.
func (g *Graph) Context(ctx context.Context, session string) ([]string, error) {
	var ids []string
	prefix := append(append([]byte(pSession), session...), 0)
	err := g.db.View(func(t *store.Txn) error {
		return t.Iterate(prefix, true, func(_, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			ids = append(ids, string(v))
			return nil
		})
	})
	return ids, err
}

// Node returns the node of a full entry ID.
func (g *Graph) Node(id string) (*Node, error) {
	var n *Node
	err := g.db.View(func(t *store.Txn) error {
		var err error
		n, err = g.node(t, id)
		return err
	})
	return n, err
}

// node reads a node through the cache. The returned node is shared: callers
// must not modify it.
func (g *Graph) node(t *store.Txn, id string) (*Node, error) {
	if n := g.cache.get(id); n != nil {
		return n, nil
	}
	b, err := t.Get(key(pNode, id))
	if errors.Is(err, store.ErrNotFound) {
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
	out := make([]*Node, len(ids))
	err := g.db.View(func(t *store.Txn) error {
		for i, id := range ids {
			n, err := g.node(t, id)
			if err != nil {
				return err
			}
			out[i] = n
		}
		return nil
	})
	return out, err
}

// Envelope returns the stored envelope and content (nil when none was stored).
func (g *Graph) Envelope(id string) (env, content []byte, err error) {
	err = g.db.View(func(t *store.Txn) error {
		env, err = t.Get(key(pEnvelope, id))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w %s", ErrUnknownEntry, id)
		}
		if err != nil {
			return err
		}
		content, err = t.Get(key(pContent, id))
		if errors.Is(err, store.ErrNotFound) {
			content, err = nil, nil
		}
		return err
	})
	return env, content, err
}

// Parents returns the parent edges of id, in the signed statement's order.
func (g *Graph) Parents(id string) ([]Edge, error) {
	var out []Edge
	err := g.db.View(func(t *store.Txn) error {
		var err error
		out, err = g.parents(t, id)
		return err
	})
	return out, err
}

// parents reads the edges from the child's node row: one read (usually a
// cache hit) where iterating edge keys opened an iterator over every level.
func (g *Graph) parents(t *store.Txn, id string) ([]Edge, error) {
	n, err := g.node(t, id)
	if err != nil {
		return nil, err
	}
	return g.Edges(n), nil
}

// Edges are n's parent edges, in the signed statement's order.
func (g *Graph) Edges(n *Node) []Edge { return n.Edges(g.reg.Tau()) }

// Resolve turns an ID or a unique prefix of at least MinPrefix hex
// characters into a full ID.
func (g *Graph) Resolve(prefix string) (string, error) {
	if len(prefix) < MinPrefix || len(prefix) > 64 || !isLowerHex(prefix) {
		return "", fmt.Errorf("%w: %q is not an entry ID (at least %d lowercase hex characters)", ErrMalformed, prefix, MinPrefix)
	}
	var found []string
	err := g.db.View(func(t *store.Txn) error {
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
				return store.ErrStop
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

// VerifyEntrySignature checks a stored envelope's signature against the
// registry, without storing anything.
func (g *Graph) VerifyEntrySignature(env []byte) error {
	_, _, _, err := g.verify(env)
	return err
}

// Count counts stored entries, stopping at limit (0: no limit).
func (g *Graph) Count(limit int) (int, error) {
	n := 0
	err := g.db.View(func(t *store.Txn) error {
		return t.Iterate([]byte(pSeq), false, func(_, _ []byte) error {
			n++
			if limit > 0 && n >= limit {
				return store.ErrStop
			}
			return nil
		})
	})
	return n, err
}
