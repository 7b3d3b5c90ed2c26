package lineage

import (
	"encoding/binary"
	"encoding/json"
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
	NParents      int    `json:"parents"`
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
	pNode     = "n/" // n/<id> -> Node (JSON)
	pContent  = "c/" // c/<id> -> content
	pForward  = "f/" // f/<parent>/<child> -> weight
	pReverse  = "r/" // r/<child>/<parent> -> weight
	pSeq      = "q/" // q/<seq, 8 bytes big-endian> -> id
	pSession  = "s/" // s/<session>\x00<seq> -> id: the session's context in order
	pMember   = "m/" // m/<session>\x00<id> -> empty: context membership
)

func key(prefix string, parts ...string) []byte {
	n := len(prefix)
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, prefix...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, '/')
		}
		b = append(b, p...)
	}
	return b
}

func seqKey(seq uint64) []byte {
	b := make([]byte, len(pSeq)+8)
	copy(b, pSeq)
	binary.BigEndian.PutUint64(b[len(pSeq):], seq)
	return b
}

func sessionKey(session string, seq uint64) []byte {
	b := make([]byte, 0, len(pSession)+len(session)+9)
	b = append(b, pSession...)
	b = append(b, session...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

func memberKey(session, id string) []byte {
	b := make([]byte, 0, len(pMember)+len(session)+1+len(id))
	b = append(b, pMember...)
	b = append(b, session...)
	b = append(b, 0)
	return append(b, id...)
}

func encodeWeight(w float64) []byte {
	return binary.BigEndian.AppendUint64(nil, math.Float64bits(w))
}

func decodeWeight(b []byte) (float64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), true
}

func encodeNode(n *Node) []byte {
	b, _ := json.Marshal(n)
	return b
}

func decodeNode(b []byte) (*Node, error) {
	var n Node
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	return &n, nil
}
