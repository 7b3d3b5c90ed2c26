package gate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// syntheticInput is a policy input with k justification entries, all
// external (the worst case: every rule fires).
func syntheticInput(k int) ast.Value {
	just := make([]*ast.Term, k)
	for i := range just {
		id := fmt.Sprintf("%064x", i)
		src := obj("id", str(strings.Repeat("f", 64)), "principal", str("tool:bench"), "tier", str("external"),
			"path", ast.ArrayTerm(str(id), str(strings.Repeat("f", 64))), "strong", ast.BooleanTerm(true))
		just[i] = obj("id", str(id), "principal", str("agent:bench"), "kind", str("memory"), "tier", str("internal"),
			"effective_tier", str("external"), "reach_tier", str("external"), "untrusted", ast.ArrayTerm(src))
	}
	jt := ast.ArrayTerm(just...)
	return obj(
		"action", obj("tool", str("bench_send"), "args", obj("n", ast.IntNumberTerm(1)), "principal", str("agent:bench"), "session", str("s")),
		"tool", toolTerm(Tool{Role: "send"}, true),
		"justification", jt,
		"arguments", obj("n", obj("explicit", ast.BooleanTerm(false), "sources", jt)),
		"trajectory", obj("features", ast.ObjectTerm(), "alerts", ast.ArrayTerm()),
		"approvals", ast.ArrayTerm(),
	).Value
}

// BenchmarkEval is the bare OPA evaluation of the default policy on inputs
// of 1, 10 and 100 justification entries: the floor a decision cannot beat.
func BenchmarkEval(b *testing.B) {
	p, err := DefaultPolicy()
	if err != nil {
		b.Fatal(err)
	}
	_ = inmem.New
	g := &Gate{timeout: time.Second}
	g.query, err = prepare(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{1, 10, 100} {
		in := syntheticInput(k)
		b.Run(fmt.Sprintf("just=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			now := time.Now()
			for b.Loop() {
				v, err := g.eval(context.Background(), in, now)
				if err != nil || v.Decision != Deny {
					b.Fatal(v, err)
				}
			}
		})
	}
}
