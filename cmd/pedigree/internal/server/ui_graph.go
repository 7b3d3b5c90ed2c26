package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pedigree-ai/pedigree/lineage"
)

// Graph geometry, in SVG user units.
const (
	gNodeW, gNodeH = 210, 58
	gGapX, gGapY   = 24, 56
	gPerRow        = 10 // a layer wider than this wraps onto more rows
	gMaxNodes      = 1000
)

// svgGraph is an ancestry laid out in layers: the traced entry on top, each
// parent one layer below its nearest child.
type svgGraph struct {
	Width, Height int
	Nodes         []svgNode
	Edges         []svgEdge
	Truncated     bool
	Collapsed     bool
	Query         string
	Total         int
	Untrusted     []lineage.Source
	RootID        string
}

type svgNode struct {
	ID, Short, Href   string
	Lines             [3]string
	X, Y              int
	Class             string
	Session           string
	CollapsedSessions int
}

type svgEdge struct {
	X1, Y1, X2, Y2 int
	Class          string
}

// graph traces id and lays its ancestry out. Query: q (highlight nodes
// whose ID, principal, kind, tool or session contains it), collapse=1
// (entries of other sessions than the traced one become one box per
// session), max (nodes, at most gMaxNodes).
func (u *ui) graph(ctx context.Context, id string, q url.Values) (*svgGraph, error) {
	maxNodes := gMaxNodes
	if m, err := strconv.Atoi(q.Get("max")); err == nil && m > 0 && m < gMaxNodes {
		maxNodes = m
	}
	tr, err := u.b.Trace(ctx, id, lineage.TraceOptions{MaxNodes: maxNodes})
	if err != nil {
		return nil, err
	}
	return layout(tr, q.Get("q"), q.Get("collapse") == "1"), nil
}

func layout(tr *lineage.Trace, query string, collapse bool) *svgGraph {
	g := &svgGraph{Truncated: tr.Truncated, Collapsed: collapse, Query: query, Total: len(tr.Nodes), Untrusted: tr.Untrusted}
	if len(tr.Nodes) == 0 {
		return g
	}
	root := tr.Nodes[0]
	if tr.Root != nil {
		root = tr.Root
	}
	g.RootID = root.ID
	byID := map[string]*lineage.Node{}
	for _, n := range tr.Nodes {
		byID[n.ID] = n
	}
	// key maps an entry to the box it is drawn in: itself, or its
	// session's box when collapsed.
	key := func(n *lineage.Node) string {
		if collapse && n.ID != root.ID && n.Session != root.Session {
			return "session:" + n.Session
		}
		return n.ID
	}
	parents := map[string][]lineage.Edge{}
	for _, e := range tr.Edges {
		parents[e.Child] = append(parents[e.Child], e)
	}
	// Breadth first from the root: each box's layer is its nearest depth.
	depth := map[string]int{key(root): 0}
	order := []string{key(root)}
	members := map[string][]*lineage.Node{key(root): {root}}
	queue := []*lineage.Node{root}
	seen := map[string]bool{root.ID: true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, e := range parents[n.ID] {
			p := byID[e.Parent]
			if p == nil || seen[p.ID] {
				continue
			}
			seen[p.ID] = true
			k := key(p)
			if _, ok := depth[k]; !ok {
				depth[k] = depth[key(n)] + 1
				order = append(order, k)
			}
			members[k] = append(members[k], p)
			queue = append(queue, p)
		}
	}
	// Untrusted roots, and the edges on their strong paths.
	roots := map[string]bool{}
	taint := map[[2]string]bool{}
	for _, s := range tr.Untrusted {
		roots[s.ID] = true
		if s.Strong {
			for i := 0; i+1 < len(s.Path); i++ {
				taint[[2]string{s.Path[i], s.Path[i+1]}] = true
			}
		}
	}
	// Rows: each layer in order of discovery, wrapped at gPerRow.
	layers := map[int][]string{}
	maxDepth := 0
	for _, k := range order {
		layers[depth[k]] = append(layers[depth[k]], k)
		maxDepth = max(maxDepth, depth[k])
	}
	pos := map[string][2]int{}
	row, widest := 0, 1
	for d := 0; d <= maxDepth; d++ {
		for i := 0; i < len(layers[d]); i += gPerRow {
			chunk := layers[d][i:min(i+gPerRow, len(layers[d]))]
			widest = max(widest, len(chunk))
			for j, k := range chunk {
				pos[k] = [2]int{gGapX + j*(gNodeW+gGapX), gGapY/2 + row*(gNodeH+gGapY)}
			}
			row++
		}
	}
	g.Width = gGapX + widest*(gNodeW+gGapX)
	g.Height = gGapY/2 + row*(gNodeH+gGapY)
	q := strings.ToLower(query)
	for _, k := range order {
		ms := members[k]
		n := ms[0]
		p := pos[k]
		sn := svgNode{ID: n.ID, Short: short(n.ID), Href: "entry/" + n.ID, X: p[0], Y: p[1], Session: n.Session}
		classes := []string{"node", "tier-" + n.Effective.String()}
		if strings.HasPrefix(k, "session:") {
			sn.CollapsedSessions = len(ms)
			sn.Lines = [3]string{clipText("session "+n.Session, 30), fmt.Sprintf("%d entries", len(ms)), "collapsed: open without collapse"}
			sn.Href = ""
			classes = append(classes, "collapsed")
			for _, m := range ms {
				if roots[m.ID] {
					classes = append(classes, "untrusted")
					break
				}
			}
		} else {
			what := string(n.Kind)
			if n.Tool != "" {
				what += " " + n.Tool
			}
			sn.Lines = [3]string{clipText(n.Principal, 30), clipText(n.Tier.String()+" · "+what, 32), clipText(n.Time, 32)}
			if roots[n.ID] {
				classes = append(classes, "untrusted")
			}
			if n.ID == root.ID {
				classes = append(classes, "root")
			}
		}
		if q != "" {
			for _, m := range ms {
				hay := strings.ToLower(strings.Join([]string{m.ID, m.Principal, string(m.Kind), m.Tool, m.Session}, " "))
				if strings.Contains(hay, q) {
					classes = append(classes, "match")
					break
				}
			}
		}
		sn.Class = strings.Join(classes, " ")
		g.Nodes = append(g.Nodes, sn)
	}
	drawn := map[[2]string]bool{}
	for _, e := range tr.Edges {
		c, p := byID[e.Child], byID[e.Parent]
		if c == nil || p == nil {
			continue
		}
		kc, kp := key(c), key(p)
		if kc == kp || drawn[[2]string{kc, kp}] {
			continue
		}
		drawn[[2]string{kc, kp}] = true
		a, b := pos[kc], pos[kp]
		class := "edge"
		if !e.Strong {
			class += " weak"
		}
		if taint[[2]string{e.Child, e.Parent}] {
			class += " taint"
		}
		g.Edges = append(g.Edges, svgEdge{X1: a[0] + gNodeW/2, Y1: a[1] + gNodeH, X2: b[0] + gNodeW/2, Y2: b[1], Class: class})
	}
	// Tainted edges last, so they are drawn over the others.
	slices.SortStableFunc(g.Edges, func(x, y svgEdge) int {
		return strings.Compare(x.Class, y.Class)
	})
	return g
}

// clipText shortens s to at most n characters, on a character boundary,
// with an ellipsis; control characters are shown escaped.
func clipText(s string, n int) string {
	s = safeText(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// safeText shows every control, format and bidi character as a visible
// escape (\x1b, \u202e), so what a person reads is what is stored: no
// terminal sequence, no reordered text, no invisible character. Newlines
// and tabs stay.
func safeText(s string) string {
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// decodeObject reads a call's canonical arguments as name → JSON value
// text (strings unquoted).
func decodeObject(raw []byte) (map[string]string, error) {
	var obj map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = s
			continue
		}
		out[k] = string(v)
	}
	return out, nil
}

var uiFuncs = template.FuncMap{
	// ui is a session's page path (replaced per session: forSession).
	"ui":       func(p string) string { return uiPrefix + p },
	"safe":     safeText,
	"short":    short,
	"add":      func(a, b int) int { return a + b },
	"outcomes": func() []string { return []string{"allow", "deny", "ask"} },
	"line":     func(i int) int { return 18 + i*16 },
	"query": func(kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v.Encode()
	},
}
