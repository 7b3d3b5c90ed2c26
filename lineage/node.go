package lineage

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"

	"github.com/pedigree-ai/pedigree/registry"
)

// Node is what the graph keeps about an entry besides its envelope: who
// wrote it, and the two labels fixed at insert with the parent that set each
// one and the untrusted root that witnesses it.
type Node struct {
	ID        string        `json:"id"`
	Seq       uint64        `json:"seq"`
	Principal string        `json:"principal"`
	Kind      Kind          `json:"kind"`
	Session   string        `json:"session,omitempty"`
	Tool      string        `json:"tool,omitempty"`
	Time      string        `json:"time"`
	Tier      registry.Tier `json:"tier"`
	Effective registry.Tier `json:"effective_tier"`
	Reach     registry.Tier `json:"reach_tier"`
	// EffectiveVia is the strong parent whose effective tier set this entry's
	// (empty when its own tier did); EffectiveRoot is the untrusted entry at
	// the end of that chain (empty when the effective tier is trusted).
	EffectiveVia  string `json:"effective_via,omitempty"`
	EffectiveRoot string `json:"effective_root,omitempty"`
	ReachVia      string `json:"reach_via,omitempty"`
	ReachRoot     string `json:"reach_root,omitempty"`
	// NParents counts every parent: the context entries a reference names
	// and the listed ones.
	NParents int `json:"n_parents"`
	// Parents are the signed parents the statement lists, with their
	// weights, in its order: walks read them from here, one row per step,
	// instead of iterating edge keys.
	Parents []Parent `json:"parents"`
	// Context is the statement's context reference (nil when it names
	// none): its first parents are the first Context.N entries of its
	// session's context, before Parents. Walks expand it from the context
	// rows (Graph.Edges), checked against Context.Head.
	Context *ContextRef `json:"context,omitempty"`
}

// Edge is a derivation edge as read back from the graph.
type Edge struct {
	Child  string  `json:"child"`
	Parent string  `json:"parent"`
	Weight float64 `json:"weight"`
	Strong bool    `json:"strong"`
}

// Key layout. IDs appear in keys as 64 hex characters, so an ID prefix is a
// key prefix.
const (
	pEnvelope = "e/" // e/<id> -> DSSE envelope
	pNode     = "n/" // n/<id> -> Node (binary, see encodeNode)
	pContent  = "c/" // c/<id> -> content
	pSeq      = "q/" // q/<seq, 8 bytes big-endian> -> id
	pSession  = "s/" // s/<session>\x00<n, 8 bytes big-endian> -> id: the n-th entry of the session's context
	pMember   = "m/" // m/<session>\x00<id> -> empty: context membership
	pRecall   = "r/" // r/<recall id> -> Recall (JSON): what put entries into a context
	pHead     = "h/" // h/<session> -> the context's count and hash chain (see contextHead)
)

func key(prefix, id string) []byte { return []byte(prefix + id) }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte(pSeq), seq) }

func sessionKey(session string, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(pSession+session+"\x00"), n)
}

func memberKey(session, id string) []byte { return []byte(pMember + session + "\x00" + id) }

// nodeFormat is the version byte of the binary node encoding. Nodes are
// read on every check and every step of a walk, so they are encoded by hand:
// JSON decoding was most of a check's time. Format 2 added the parents;
// format 3, written only for an entry that names its context by reference,
// adds the reference after them, so every other row keeps format 2, byte
// for byte.
const (
	nodeFormat    = 2
	nodeFormatRef = 3
)

func encodeNode(n *Node) []byte {
	// About 256 bytes of fields, then 41 bytes per parent.
	b := make([]byte, 0, 256+41*len(n.Parents))
	format := byte(nodeFormat)
	if n.Context != nil {
		format = nodeFormatRef
	}
	b = append(b, format)
	b = appendID(b, n.ID)
	b = binary.AppendUvarint(b, n.Seq)
	for _, s := range []string{n.Principal, string(n.Kind), n.Session, n.Tool, n.Time} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, byte(n.Tier), byte(n.Effective), byte(n.Reach))
	for _, id := range []string{n.EffectiveVia, n.EffectiveRoot, n.ReachVia, n.ReachRoot} {
		b = appendID(b, id)
	}
	b = binary.AppendUvarint(b, uint64(len(n.Parents)))
	for _, p := range n.Parents {
		b = appendID(b, p.ID)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.Weight))
	}
	if c := n.Context; c != nil {
		b = binary.AppendUvarint(b, uint64(c.N))
		b = appendID(b, c.Head)
	}
	return b
}

// appendID writes an optional ID: a 0 byte for none, else 1 and its 32 raw
// bytes. Every ID is checked (IsID) before it reaches a node; one that was
// not would make a row that does not decode, which verify names.
func appendID(b []byte, id string) []byte {
	if id == "" {
		return append(b, 0)
	}
	b, _ = hex.AppendDecode(append(b, 1), []byte(id))
	return b
}

var errBadNode = errors.New("malformed node row")

type nodeReader struct {
	b   []byte
	err error
}

func (r *nodeReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errBadNode
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *nodeReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadNode
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *nodeReader) bytes(n uint64) []byte {
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errBadNode
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *nodeReader) uint64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *nodeReader) string() string { return string(r.bytes(r.uvarint())) }

func (r *nodeReader) id() string {
	switch r.byte() {
	case 0:
		return ""
	case 1:
		return hex.EncodeToString(r.bytes(32))
	}
	r.err = errBadNode
	return ""
}

func decodeNode(b []byte) (*Node, error) {
	r := &nodeReader{b: b}
	format := r.byte()
	if format != nodeFormat && format != nodeFormatRef {
		return nil, errBadNode
	}
	n := &Node{ID: r.id(), Seq: r.uvarint(), Principal: r.string(), Kind: Kind(r.string()), Session: r.string(), Tool: r.string(), Time: r.string()}
	n.Tier, n.Effective, n.Reach = registry.Tier(r.byte()), registry.Tier(r.byte()), registry.Tier(r.byte())
	n.EffectiveVia, n.EffectiveRoot, n.ReachVia, n.ReachRoot = r.id(), r.id(), r.id(), r.id()
	count := r.uvarint()
	// Each parent takes at least 9 bytes: refuse a count the row cannot
	// hold before allocating for it.
	if r.err == nil && count > uint64(len(r.b))/9 {
		r.err = errBadNode
	}
	if r.err == nil && count > 0 {
		n.Parents = make([]Parent, count)
		for i := range n.Parents {
			n.Parents[i].ID = r.id()
			w := math.Float64frombits(r.uint64())
			if math.IsNaN(w) || w < 0 || w > 1 {
				r.err = errBadNode
			}
			n.Parents[i].Weight = w
		}
	}
	n.NParents = int(count)
	if format == nodeFormatRef {
		c := &ContextRef{}
		if v := r.uvarint(); v >= 1 && v <= MaxContextRef {
			c.N = int(v)
		} else {
			r.err = errBadNode
		}
		if c.Head = r.id(); c.Head == "" {
			r.err = errBadNode
		}
		n.Context = c
		n.NParents += c.N
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errBadNode
	}
	if r.err != nil {
		return nil, r.err
	}
	return n, nil
}

// Edges are n's listed parent edges, in the signed statement's order, each
// marked strong when its weight is at least tau. For a node that names its
// context by reference (n.Context) they are not all its parents: read those
// with Graph.Edges, which expands the reference.
func (n *Node) Edges(tau float64) []Edge {
	out := make([]Edge, len(n.Parents))
	for i, p := range n.Parents {
		out[i] = Edge{Child: n.ID, Parent: p.ID, Weight: p.Weight, Strong: p.Weight >= tau}
	}
	return out
}
