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
	// Full, it drops an eighth of a shard at a time, not everything.
	if got := cachedCount(c); got > size || got < size-size/8 {
		t.Fatalf("the cache holds %d nodes, want %d to %d", got, size-size/8, size)
	}

	// A cache smaller than a shard's eighth still drops what it must.
	c = newNodeCache(16)
	for i := range 1000 {
		c.put(&Node{ID: fmt.Sprintf("%064x", i)})
		if got := cachedCount(c); got > 16 {
			t.Fatalf("after %d puts, a cache of 16 holds %d nodes", i+1, got)
		}
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
