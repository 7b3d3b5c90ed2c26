package lineage

import (
	"fmt"
	"testing"
)

func cachedCount(c *nodeCache) int {
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	return n
}

// The node cache holds at most its size however many nodes go through it,
// keeps the node just put, and drops nothing while it has room: a check
// reads its parents from it instead of the store.
func TestNodeCacheBounds(t *testing.T) {
	const size = 16 * 64
	c := newNodeCache(size)
	for i := range 20 * size {
		n := &Node{ID: fmt.Sprintf("%064x", i)}
		c.put(n)
		if c.get(n.ID) != n {
			t.Fatalf("node %d is not in the cache right after put", i)
		}
	}
	if got := cachedCount(c); got > size {
		t.Fatalf("the cache holds %d nodes, more than its size %d", got, size)
	}

	c = newNodeCache(size)
	const few = size / 8 // far below what one shard holds, whatever the hashing
	for i := range few {
		c.put(&Node{ID: fmt.Sprintf("%064x", i)})
	}
	for i := range few {
		if c.get(fmt.Sprintf("%064x", i)) == nil {
			t.Fatalf("node %d of %d was dropped from a cache of %d", i, few, size)
		}
	}
}
