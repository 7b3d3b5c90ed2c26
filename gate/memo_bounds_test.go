package gate

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// plainInt accepts exactly the integers Go's strconv writes, in at most 18
// digits: every other spelling of a number is evaluated, never memoised.
func TestPlainInt(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "9": true, "-1": true, "10": true, "123456789012345678": true, "-123456789012345678": true,
		"": false, "-": false, "-0": false, "01": false, "-01": false, "1e2": false, "1.0": false, "1E2": false,
		"1234567890123456789": false, "/": false, ":": false, "1/": false, "1:": false, "+1": false, " 1": false,
	} {
		if got := plainInt(ast.Number(s)); got != want {
			t.Errorf("plainInt(%q) = %v, want %v", s, got, want)
		}
	}
}

// minimalPaths keeps one of equal paths and drops every path another is a
// prefix of.
func TestMinimalPaths(t *testing.T) {
	got := minimalPaths([][]string{{"a", "b"}, {"a"}, {"c"}, {"a"}, {"c", "d", "e"}, {"b", "a"}})
	want := [][]string{{"a"}, {"b", "a"}, {"c"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("minimalPaths = %v, want %v", got, want)
	}
}

// A key holds at most maxMemoTerms terms, and every number in it must be
// plain, however deep: an input past either is evaluated every time.
func TestMemoKeyBounds(t *testing.T) {
	m := &memo{paths: [][]string{{"x"}}, m: map[int][]memoEntry{}}
	input := func(elems string) ast.Value {
		v, err := ast.ValueFromReader(strings.NewReader(`{"x": [` + elems + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	zeros := func(n int) string { return strings.TrimSuffix(strings.Repeat("0,", n), ",") }
	// The array's own term and its elements: maxMemoTerms in all.
	if _, ok := m.key(input(zeros(maxMemoTerms - 1))); !ok {
		t.Fatal("a key of exactly maxMemoTerms terms is not memoised")
	}
	if _, ok := m.key(input(zeros(maxMemoTerms))); ok {
		t.Fatal("a key of more than maxMemoTerms terms is memoised")
	}
	for _, deep := range []string{`1e2`, `[[1.0]]`, `{"a": [0, {"b": 2.5}]}`, `0, 0, [1, 2, 3.5]`} {
		if _, ok := m.key(input(deep)); ok {
			t.Errorf("a key holding a number that is not a plain integer (%s) is memoised", deep)
		}
	}
	if k, ok := m.key(input(`1, [2, {"a": -3}]`)); !ok || k == nil {
		t.Fatal("a key of plain integers is not memoised")
	}
}

// put holds one value per key, keeps every value while there is room,
// and never more than maxMemo.
func TestMemoPutBounds(t *testing.T) {
	m := &memo{m: map[int][]memoEntry{}}
	key := func(i int) ast.Value { return ast.NewArray(ast.StringTerm(fmt.Sprint("k", i))) }
	val := func(i int) ast.Value { return ast.Number(fmt.Sprint(i)) }
	m.put(key(0), val(0))
	m.put(key(0), val(7))
	if m.n != 1 || m.get(key(0)).Compare(val(0)) != 0 {
		t.Fatalf("the same key put twice: %d values, first kept %v", m.n, m.get(key(0)))
	}
	for i := 1; i < maxMemo; i++ {
		m.put(key(i), val(i))
	}
	if m.n != maxMemo {
		t.Fatalf("%d values after %d distinct puts", m.n, maxMemo)
	}
	for i := range maxMemo {
		if v := m.get(key(i)); v == nil || v.Compare(val(i)) != 0 {
			t.Fatalf("value %d dropped while there was room: %v", i, v)
		}
	}
	m.put(key(maxMemo), val(maxMemo))
	if m.n > maxMemo || m.n < maxMemo-maxMemo/8 || m.get(key(maxMemo)) == nil {
		t.Fatalf("past maxMemo: %d values (want at most %d, at least %d), the newest held: %v", m.n, maxMemo, maxMemo-maxMemo/8, m.get(key(maxMemo)) != nil)
	}
	held := 0
	for i := range maxMemo + 1 {
		if m.get(key(i)) != nil {
			held++
		}
	}
	if held != m.n {
		t.Fatalf("the count says %d, the memo holds %d", m.n, held)
	}
}
