package gate

import (
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The policy stays the authority, and is evaluated: a memo keeps the value
// it yielded on an input, keyed by every part of the input the policy can
// read, so that the next input equal in all those parts gets the same value
// without a second evaluation. With the allowlisted builtins, a policy that
// calls none that is nondeterministic (time, randomness, the network) is a
// pure function of those parts and of its data, which do not change while
// the gate runs; a policy that calls one is not memoised. The parts are the
// paths under input that the compiled modules name (input.tool.args[name]
// reads all of input.tool.args); a module that names input itself, or an
// input path through a variable at its first step, makes the whole input
// the key. The reasons are always written from the input itself, not
// remembered. Reevaluate never uses the memo.

// memo is a gate's memo (nil: the policy is not memoised). Its values are
// found by the hash of what the policy reads of an input (OPA keeps the
// hashes of objects and arrays as they are built, so this is cheap) and
// compared in full. An input with a number that is not a plain integer
// (plainInt) is not memoised: OPA's comparison does not tell 1e2 from 100.
type memo struct {
	paths [][]string // sorted, none a prefix of another; an empty path is the whole input
	mu    sync.Mutex
	m     map[int][]memoEntry
	n     int
}

type memoEntry struct{ key, val ast.Value }

// maxMemo bounds how many values the memo holds; past it, some are
// dropped. maxMemoTerms bounds the size of one key (a long tainted
// justification makes a large key, and is not memoised).
const (
	maxMemo      = 4096
	maxMemoTerms = 1024
)

// newMemo returns the memo of policy p, or nil when p cannot be memoised:
// it does not compile here, or it calls a nondeterministic builtin.
func newMemo(p *Policy) *memo {
	c := ast.NewCompiler().WithCapabilities(capabilities())
	if c.Compile(p.Modules); c.Failed() {
		return nil
	}
	nondeterministic := false
	var paths [][]string
	for _, m := range c.Modules {
		ast.WalkTerms(m, func(t *ast.Term) bool {
			switch x := t.Value.(type) {
			case ast.Call:
				if b := ast.BuiltinMap[x[0].String()]; b != nil && b.Nondeterministic {
					nondeterministic = true
				}
			case ast.Ref:
				if !x[0].Equal(ast.InputRootDocument) {
					return false
				}
				path := []string{}
				for _, s := range x[1:] {
					k, ok := s.Value.(ast.String)
					if !ok {
						break
					}
					path = append(path, string(k))
				}
				paths = append(paths, path)
			}
			return false
		})
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if e.IsCall() {
				if b := ast.BuiltinMap[e.Operator().String()]; b != nil && b.Nondeterministic {
					nondeterministic = true
				}
			}
			return false
		})
	}
	if nondeterministic {
		return nil
	}
	return &memo{paths: minimalPaths(paths), m: map[int][]memoEntry{}}
}

// minimalPaths sorts paths and drops every path another is a prefix of.
func minimalPaths(paths [][]string) [][]string {
	slices.SortFunc(paths, func(a, b []string) int { return slices.Compare(a, b) })
	var out [][]string
	for _, p := range paths {
		if n := len(out); n > 0 && len(out[n-1]) <= len(p) && slices.Equal(out[n-1], p[:len(out[n-1])]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// key is the memo's key of input in: for every path the policy reads, an
// array of its value there, or an empty one when there is none. ok is
// false when the input is not memoised.
func (m *memo) key(in ast.Value) (ast.Value, bool) {
	parts := make([]*ast.Term, len(m.paths))
	terms := 0
	for i, p := range m.paths {
		t := ast.NewTerm(in)
		for _, k := range p {
			o, ok := t.Value.(ast.Object)
			if !ok {
				t = nil
				break
			}
			if t = o.Get(keyOf(k)); t == nil {
				break
			}
		}
		if t == nil {
			parts[i] = ast.ArrayTerm()
			continue
		}
		plain := true
		ast.WalkTerms(t, func(x *ast.Term) bool {
			terms++
			if n, ok := x.Value.(ast.Number); ok && !plainInt(n) {
				plain = false
			}
			return terms > maxMemoTerms || !plain
		})
		if terms > maxMemoTerms || !plain {
			return nil, false
		}
		parts[i] = ast.ArrayTerm(t)
	}
	return ast.NewArray(parts...), true
}

func (m *memo) get(k ast.Value) ast.Value {
	h := k.Hash()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.m[h] {
		if e.key.Compare(k) == 0 {
			return e.val
		}
	}
	return nil
}

func (m *memo) put(k, v ast.Value) {
	h := k.Hash()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.m[h] {
		if e.key.Compare(k) == 0 {
			return
		}
	}
	if m.n >= maxMemo {
		drop := maxMemo / 8
		for h, es := range m.m {
			if drop <= 0 {
				break
			}
			delete(m.m, h)
			m.n -= len(es)
			drop -= len(es)
		}
	}
	m.m[h] = append(m.m[h], memoEntry{k, v})
	m.n++
}

// plainInt reports whether n is an integer written as Go's strconv
// writes it (no sign but a minus, no leading zero, no fraction or exponent,
// not -0), in at most 18 digits. OPA compares numbers by value (100, 1e2
// and 100.0 are equal, with one hash), but a policy can read how a number
// is written (json.marshal, sprintf); two keys equal by value whose numbers
// are all plain are written alike, so only those are memoised.
func plainInt(n ast.Number) bool {
	s := string(n)
	if s != "" && s[0] == '-' {
		s = s[1:]
		if s == "0" {
			return false
		}
	}
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String lists the memo's key paths, for tests and logs.
func (m *memo) String() string {
	if m == nil {
		return "not memoised"
	}
	var s []string
	for _, p := range m.paths {
		s = append(s, strings.Join(append([]string{"input"}, p...), "."))
	}
	return strings.Join(s, " ")
}
