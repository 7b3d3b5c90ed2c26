package lineage

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// TraceOptions bound a trace.
type TraceOptions struct {
	MaxDepth int // 0: DefaultTraceDepth
	MaxNodes int // 0: DefaultTraceNodes; capped at MaxTraceNodes
}

// Source is an untrusted ancestor and the path that reaches it.
type Source struct {
	ID        string        `json:"id"`
	Principal string        `json:"principal"`
	Tier      registry.Tier `json:"tier"`
	// Path runs from the traced entry to the untrusted root, both included.
	Path []string `json:"path"`
	// Strong is true when every edge on Path is strong, so the root taints
	// the effective tier; false when it is reached only through a weak edge.
	Strong bool `json:"strong"`
}

// Trace is an entry's bounded ancestry.
type Trace struct {
	Root      *Node    `json:"-"`
	Nodes     []*Node  `json:"nodes"`
	Edges     []Edge   `json:"edges"`
	Untrusted []Source `json:"untrusted"`
	Truncated bool     `json:"truncated"`
}

// Trace walks the ancestry of id over the parents in its node rows, inside one read
// transaction, breadth first so that each untrusted root is reported with a
// shortest path. Strong edges are walked first: a root reachable through
// strong edges only is reported with such a path. The walk stops at
// MaxDepth or MaxNodes and says so in Truncated.
func (g *Graph) Trace(ctx context.Context, id string, o TraceOptions) (*Trace, error) {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultTraceDepth
	}
	if o.MaxNodes <= 0 {
		o.MaxNodes = DefaultTraceNodes
	}
	o.MaxNodes = min(o.MaxNodes, MaxTraceNodes)
	tr := &Trace{}
	err := g.store.View(func(t kv.Txn) error {
		root, err := g.node(t, id)
		if err != nil {
			return err
		}
		tr.Root = root
		w := &walker{g: g, t: t, o: o, nodes: map[string]*Node{id: root}, edges: map[string][]Edge{}, tr: tr}
		// Pass 1 over strong edges, pass 2 over every edge: each node keeps
		// the path of the pass that reached it first.
		strongVia, err := w.bfs(ctx, id, true)
		if err != nil {
			return err
		}
		anyVia, err := w.bfs(ctx, id, false)
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(w.nodes))
		for nid := range w.nodes {
			ids = append(ids, nid)
		}
		// Newest first: the traced entry, then its ancestry back in time.
		slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(w.nodes[b].Seq, w.nodes[a].Seq) })
		for _, nid := range ids {
			n := w.nodes[nid]
			tr.Nodes = append(tr.Nodes, n)
			tr.Edges = append(tr.Edges, w.edges[nid]...)
			if n.Tier.Trusted() {
				continue
			}
			s := Source{ID: nid, Principal: n.Principal, Tier: n.Tier}
			if _, ok := strongVia[nid]; ok {
				s.Path, s.Strong = path(strongVia, id, nid), true
			} else {
				s.Path = path(anyVia, id, nid)
			}
			tr.Untrusted = append(tr.Untrusted, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tr, nil
}

type walker struct {
	g     *Graph
	t     kv.Txn
	o     TraceOptions
	nodes map[string]*Node
	edges map[string][]Edge // child -> its parent edges, each read once
	tr    *Trace
}

func (w *walker) parentEdges(id string) ([]Edge, error) {
	if es, ok := w.edges[id]; ok {
		return es, nil
	}
	es, err := w.g.parents(w.t, id)
	if err != nil {
		return nil, err
	}
	if es == nil {
		es = []Edge{}
	}
	w.edges[id] = es
	return es, nil
}

// bfs returns, for each node reached, the child it was reached from.
func (w *walker) bfs(ctx context.Context, start string, strongOnly bool) (map[string]string, error) {
	via := map[string]string{start: ""}
	frontier := []string{start}
	for range w.o.MaxDepth {
		if len(frontier) == 0 {
			return via, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var next []string
		for _, id := range frontier {
			es, err := w.parentEdges(id)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				if strongOnly && !e.Strong {
					continue
				}
				if _, seen := via[e.Parent]; seen {
					continue
				}
				if _, known := w.nodes[e.Parent]; !known {
					if len(w.nodes) >= w.o.MaxNodes {
						w.tr.Truncated = true
						continue
					}
					n, err := w.g.node(w.t, e.Parent)
					if err != nil {
						return nil, fmt.Errorf("entry %s names parent %s: %w", id, e.Parent, err)
					}
					w.nodes[e.Parent] = n
				}
				via[e.Parent] = id
				next = append(next, e.Parent)
			}
		}
		frontier = next
	}
	// The walk stopped at the depth bound: what it did not expand is cut
	// off if it has parents.
	for _, id := range frontier {
		if es, err := w.parentEdges(id); err != nil {
			return nil, err
		} else if len(es) > 0 {
			w.tr.Truncated = true
		}
	}
	return via, nil
}

func path(via map[string]string, from, to string) []string {
	var p []string
	for cur := to; ; cur = via[cur] {
		p = append(p, cur)
		if cur == from {
			break
		}
	}
	slices.Reverse(p)
	return p
}

// Witness follows, from n, the chain of parents that set its effective tier
// (reach tier when reach is true) down to the untrusted root at its end.
// It reads one node per step, so its cost is the chain's length, not the
// size of the ancestry. It returns nil when the label is trusted.
func (g *Graph) Witness(n *Node, reach bool) (*Source, error) {
	var s *Source
	err := g.store.View(func(t kv.Txn) error {
		var err error
		s, err = g.witness(t, n, reach)
		return err
	})
	return s, err
}

// Witnesses returns, for each node, the sources of its untrusted labels:
// the effective tier's root first, then the reach tier's when it is another
// entry. One read transaction for all of them: this is what the gate calls
// on every check.
func (g *Graph) Witnesses(ns []*Node) ([][]Source, error) {
	var out [][]Source
	err := g.store.View(func(t kv.Txn) error {
		var err error
		out, err = g.WitnessesIn(t, ns)
		return err
	})
	return out, err
}

// WitnessesIn is Witnesses inside t, the graph's namespace of a read
// transaction the caller holds.
func (g *Graph) WitnessesIn(t kv.Txn, ns []*Node) ([][]Source, error) {
	out := make([][]Source, len(ns))
	for i, n := range ns {
		for _, reach := range []bool{false, true} {
			s, err := g.witness(t, n, reach)
			if err != nil {
				return nil, err
			}
			if s == nil || (reach && len(out[i]) > 0 && out[i][0].ID == s.ID) {
				continue
			}
			out[i] = append(out[i], *s)
		}
	}
	return out, nil
}

func (g *Graph) witness(t kv.Txn, n *Node, reach bool) (*Source, error) {
	label, root := n.Effective, n.EffectiveRoot
	if reach {
		label, root = n.Reach, n.ReachRoot
	}
	if label.Trusted() {
		return nil, nil
	}
	s := &Source{Path: []string{n.ID}, Strong: !reach}
	cur := n
	for cur.ID != root {
		next := cur.EffectiveVia
		if reach {
			next = cur.ReachVia
		}
		if next == "" || len(s.Path) >= MaxWitnessPath {
			return nil, fmt.Errorf("entry %s: the chain to its untrusted root %s is broken at %s", n.ID, root, cur.ID)
		}
		var err error
		if cur, err = g.node(t, next); err != nil {
			return nil, err
		}
		s.Path = append(s.Path, cur.ID)
	}
	s.ID, s.Principal, s.Tier = cur.ID, cur.Principal, cur.Tier
	if reach {
		// A reach witness is strong only when it is also the effective one.
		s.Strong = n.Effective == n.Reach && n.EffectiveRoot == n.ReachRoot
	}
	return s, nil
}
