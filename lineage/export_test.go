package lineage

import (
	"encoding/base64"
	"encoding/json"

	"github.com/pedigree-ai/pedigree/registry"
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

// RewriteEffective returns a node row with its effective tier replaced:
// the tampering a test must see verify catch.
func RewriteEffective(row []byte, tier registry.Tier) ([]byte, error) {
	n, err := decodeNode(row)
	if err != nil {
		return nil, err
	}
	n.Effective = tier
	return encodeNode(n), nil
}

// RewriteParentWeights returns a node row whose parents all carry weight w:
// a row that disagrees with its signed statement.
func RewriteParentWeights(row []byte, w float64) ([]byte, error) {
	n, err := decodeNode(row)
	if err != nil {
		return nil, err
	}
	for i := range n.Parents {
		n.Parents[i].Weight = w
	}
	return encodeNode(n), nil
}
