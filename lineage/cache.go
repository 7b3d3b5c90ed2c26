package lineage

import (
	"hash/maphash"
	"sync"
)

// nodeCache keeps decoded nodes. Entries are immutable and only this process
// writes the store (Badger locks the directory), so a cached node is never
// stale. Verify does not use it: it reads every row from the store.
type nodeCache struct {
	seed   maphash.Seed
	shards [16]cacheShard
	per    int
}

type cacheShard struct {
	mu sync.Mutex
	m  map[string]*Node
}

// DefaultNodeCache is how many nodes the cache holds (about 500 bytes each).
const DefaultNodeCache = 64 << 10

func newNodeCache(size int) *nodeCache {
	c := &nodeCache{seed: maphash.MakeSeed(), per: max(1, size/16)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*Node)
	}
	return c
}

func (c *nodeCache) shard(id string) *cacheShard {
	return &c.shards[maphash.String(c.seed, id)%16]
}

func (c *nodeCache) get(id string) *Node {
	s := c.shard(id)
	s.mu.Lock()
	n := s.m[id]
	s.mu.Unlock()
	return n
}

func (c *nodeCache) put(n *Node) {
	s := c.shard(n.ID)
	s.mu.Lock()
	if len(s.m) >= c.per {
		// Drop an eighth of the shard (at least one node), in map order
		// (unspecified, so close to random): cheaper than keeping an LRU
		// list on every read.
		drop := max(1, c.per/8)
		for k := range s.m {
			if drop <= 0 {
				break
			}
			delete(s.m, k)
			drop--
		}
	}
	s.m[n.ID] = n
	s.mu.Unlock()
}
