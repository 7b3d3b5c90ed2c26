package lineage

import (
	"encoding/base64"
	"encoding/json"
	"github.com/pedigree-ai/pedigree/kv"
)

// ReplacePayload swaps an envelope's payload and keeps its signature: the
// forgery a test must see refused.
func ReplacePayload(env, payload []byte) []byte {
	var e envelope
	if err := json.Unmarshal(env, &e); err != nil {
		panic(err)
	}
	e.Payload = base64.StdEncoding.EncodeToString(payload)
	out, _ := json.Marshal(e)
	return out
}

// RewriteNode returns a node row changed by fn: the tampering a test must
// see verify catch.
func RewriteNode(row []byte, fn func(*Node)) ([]byte, error) {
	n, err := decodeNode(row)
	if err != nil {
		return nil, err
	}
	fn(n)
	return encodeNode(n), nil
}

// NodeRow encodes n as the graph stores it: rows a test writes directly.
func NodeRow(n *Node) []byte { return encodeNode(n) }

// ContextIn is contextIn, for tests that hold a read transaction.
func (g *Graph) ContextIn(t kv.Txn, session string) ([]string, error) { return g.contextIn(t, session) }
