package gate

import (
	"encoding/json"
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

// memo is a gate's memo (nil: the policy is not memoised).
type memo struct {
	paths [][]string // sorted, none a prefix of another; a nil path is the whole input
	mu    sync.Mutex
	m     map[string]ast.Value
}

// maxMemo bounds how many values the memo holds; past it, some are
// dropped. maxMemoKey bounds the key of one input (a long tainted context
// makes a long key, and is not memoised).
const (
	maxMemo    = 4096
	maxMemoKey = 16 << 10
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
	return &memo{paths: minimalPaths(paths), m: map[string]ast.Value{}}
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

// key is the memo's key of input in: every path the policy reads, with the
// JSON of its value there (or its absence). ok is false when the input is
// not memoised.
func (m *memo) key(in ast.Value) (string, bool) {
	var b []byte
	for _, p := range m.paths {
		path, _ := json.Marshal(p)
		b = append(append(b, path...), '=')
		v := in
		for _, k := range p {
			o, ok := v.(ast.Object)
			if !ok {
				v = nil
				break
			}
			t := o.Get(keyOf(k))
			if t == nil {
				v = nil
				break
			}
			v = t.Value
		}
		if v == nil {
			b = append(b, '-')
		} else {
			var err error
			if b, err = appendJSON(b, v); err != nil {
				return "", false
			}
		}
		b = append(b, '\n')
		if len(b) > maxMemoKey {
			return "", false
		}
	}
	return string(b), true
}

func (m *memo) get(k string) ast.Value {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[k]
}

func (m *memo) put(k string, v ast.Value) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxMemo {
		drop := maxMemo / 8
		for k := range m.m {
			if drop <= 0 {
				break
			}
			delete(m.m, k)
			drop--
		}
	}
	m.m[k] = v
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
