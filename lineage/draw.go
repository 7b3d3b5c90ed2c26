package lineage

import (
	"fmt"
	"io"

	"github.com/dominikbraun/graph"
	"github.com/dominikbraun/graph/draw"
)

// Graph is the trace's bounded subgraph as a dominikbraun/graph value, each
// vertex labelled and coloured by its effective tier, each edge drawn solid
// when strong and dashed when weak. A trace is small, so the library's
// copying costs nothing here; walks on the hot path are our own, inside one
// read transaction (the library copies the whole graph on every traversal).
func (tr *Trace) Graph() (graph.Graph[string, string], error) {
	g := graph.New(graph.StringHash, graph.Directed(), graph.Acyclic())
	for _, n := range tr.Nodes {
		color := "black"
		if !n.Effective.Trusted() {
			color = "red"
		}
		label := fmt.Sprintf("%s\\n%s %s\\n%s/%s", short(n.ID), n.Principal, n.Kind, n.Tier, n.Effective)
		if err := g.AddVertex(n.ID, graph.VertexAttribute("label", label), graph.VertexAttribute("color", color)); err != nil {
			return nil, err
		}
	}
	for _, e := range tr.Edges {
		style := "solid"
		if !e.Strong {
			style = "dashed"
		}
		if err := g.AddEdge(e.Child, e.Parent, graph.EdgeAttribute("label", fmt.Sprint(e.Weight)), graph.EdgeAttribute("style", style)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// DOT draws the trace's subgraph for Graphviz.
func (tr *Trace) DOT(w io.Writer) error {
	g, err := tr.Graph()
	if err != nil {
		return err
	}
	return draw.DOT(g, w)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
