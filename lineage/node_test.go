package lineage

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/registry"
)

func TestNodeEncodingRoundTrips(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, n := range []*Node{
		{ID: id, Seq: 1, Principal: "user:a", Kind: KindPrompt, Time: "t", Tier: registry.User, Effective: registry.User, Reach: registry.User},
		{ID: id, Seq: 1 << 40, Principal: "agent:x", Kind: KindCall, Session: "s/1", Tool: "send", Time: "2026",
			Tier: registry.Internal, Effective: registry.External, Reach: registry.External,
			EffectiveVia: strings.Repeat("01", 32), EffectiveRoot: strings.Repeat("02", 32), ReachVia: strings.Repeat("03", 32), ReachRoot: strings.Repeat("04", 32),
			NParents: 2, Parents: []Parent{{ID: strings.Repeat("05", 32), Weight: 1}, {ID: strings.Repeat("06", 32), Weight: 0.25}}},
		maxParents(id),
	} {
		got, err := decodeNode(encodeNode(n))
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, n)
		}
	}
}

// maxParents is a node with as many parents as an entry may name.
func maxParents(id string) *Node {
	n := &Node{ID: id, Principal: "agent:x", Kind: KindSummary, Time: "t", Tier: registry.Internal, Effective: registry.Internal, Reach: registry.Internal,
		NParents: MaxParents, Parents: make([]Parent, MaxParents)}
	for i := range n.Parents {
		n.Parents[i] = Parent{ID: fmt.Sprintf("%064x", i), Weight: float64(i%3) / 2}
	}
	return n
}

func FuzzDecodeNode(f *testing.F) {
	f.Add(encodeNode(&Node{ID: strings.Repeat("ab", 32), Principal: "user:a", Tier: 2, Effective: 4, Reach: 4, EffectiveRoot: strings.Repeat("cd", 32),
		NParents: 1, Parents: []Parent{{ID: strings.Repeat("ef", 32), Weight: 0.5}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeNode(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to a row that decodes the same.
		again, err := decodeNode(encodeNode(n))
		if err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("unstable: %+v vs %+v", n, again)
		}
	})
}

// A node row cut short anywhere, or with a byte no encoder writes, is
// refused; so is a parent count the row cannot hold, before anything is
// allocated for it.
func TestDecodeNodeRefusesBadRows(t *testing.T) {
	n := &Node{ID: strings.Repeat("ab", 32), Seq: 7, Principal: "agent:x", Kind: KindMemory, Session: "s", Time: "2026",
		Tier: registry.Internal, Effective: registry.External, Reach: registry.External,
		EffectiveVia: strings.Repeat("01", 32), EffectiveRoot: strings.Repeat("02", 32), ReachVia: strings.Repeat("01", 32), ReachRoot: strings.Repeat("02", 32),
		NParents: 1, Parents: []Parent{{ID: strings.Repeat("01", 32), Weight: 0.5}}}
	bare := &Node{ID: strings.Repeat("cd", 32), Principal: "user:a", Kind: KindPrompt, Time: "t", Tier: registry.User, Effective: registry.User, Reach: registry.User}
	for _, n := range []*Node{n, bare} {
		row := encodeNode(n)
		for i := range row {
			if _, err := decodeNode(row[:i]); err == nil {
				t.Errorf("a row cut to %d of its %d bytes decoded", i, len(row))
			}
		}
		if _, err := decodeNode(append(slices.Clone(row), 0)); err == nil {
			t.Error("a row with a trailing byte decoded")
		}
	}
	row := encodeNode(bare)
	huge := binary.AppendUvarint(slices.Clone(row[:len(row)-1]), 1<<62)
	if _, err := decodeNode(huge); err == nil {
		t.Error("a row claiming 2^62 parents decoded")
	}
	for name, edit := range map[string]func([]byte){
		"format":    func(b []byte) { b[0] = nodeFormat + 1 },
		"ID marker": func(b []byte) { b[1] = 2 },
	} {
		b := slices.Clone(row)
		edit(b)
		if _, err := decodeNode(b); err == nil {
			t.Errorf("a row with another %s decoded", name)
		}
	}
	for _, w := range []float64{math.NaN(), -0.5, 1.5} {
		bad := *n
		bad.Parents = []Parent{{ID: strings.Repeat("01", 32), Weight: w}}
		if _, err := decodeNode(encodeNode(&bad)); err == nil {
			t.Errorf("a parent of weight %v decoded", w)
		}
	}
}
