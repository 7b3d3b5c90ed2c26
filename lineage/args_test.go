package lineage_test

import (
	"errors"
	"testing"

	"github.com/pedigree-ai/pedigree/lineage"
)

// TestCanonicalArgsRefusesRewrites: canonicalisation must not change what
// the tool sees. Two equal keys (the last would win) and invalid UTF-8 or a
// lone surrogate (either would become U+FFFD) are refused, at any depth.
func TestCanonicalArgsRefusesRewrites(t *testing.T) {
	for _, raw := range []string{
		`{"to":"123-456","to":"999-666"}`,
		`{"a":{"to":"1","to":"2"}}`,
		`{"a":[{"b":1},{"c":{"d":1,"d":2}}]}`,
		`{"to":"` + "\xff" + `"}`,
		`{"` + "\xc3" + `":1}`,
		`{"to":"\ud800"}`,
		`{"to":"\udc00x"}`,
		`{"to":"\ud800\u0041"}`,
		`{"to":"\udfff"}`,
		`{"to":"\udbff\udbff"}`,
		`{"to":"\udbff\ue000"}`,
		// Cut short inside an escape: refused, not a panic.
		`{"to":"\ud8`, `{"to":"\ud800\udc`, `{"to":"\`, `{"to":"\u`,
	} {
		if got, err := lineage.CanonicalArgs([]byte(raw)); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("%q: got %s, %v; want ErrMalformed", raw, got, err)
		}
	}
	for raw, want := range map[string]string{
		`{"b":1,"a":"x"}`:                           `{"a":"x","b":1}`,
		`{"a":{"to":1},"b":{"to":2}}`:               `{"a":{"to":1},"b":{"to":2}}`,
		`{"a":[{"k":1},{"k":2}],"k":3}`:             `{"a":[{"k":1},{"k":2}],"k":3}`,
		`{"s":"\ud83d\ude00 \\ud800 \"\\\""}`:       `{"s":"😀 \\ud800 \"\\\""}`,
		`{"u":"ü","e":"\u00e9"}`:                    `{"e":"é","u":"ü"}`,
		`{"lo":"\ud800\udc00","hi":"\udbff\udfff"}`: "{\"hi\":\"\U0010FFFF\",\"lo\":\"\U00010000\"}",
		`{"a":[],"b":{},"c":[[{"x":{"y":[]}}]]}`:    `{"a":[],"b":{},"c":[[{"x":{"y":[]}}]]}`,
	} {
		got, err := lineage.CanonicalArgs([]byte(raw))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s, %v; want %s", raw, got, err, want)
		}
	}
}

// FuzzCanonicalArgs: whatever canonicalises decodes to the same value as the
// input, and canonicalising again changes nothing.
func FuzzCanonicalArgs(f *testing.F) {
	for _, s := range []string{`{"to":"123-456","to":"999-666"}`, `{"to":"` + "\xff" + `"}`, `{"to":"\ud800"}`,
		`{"a":{"b":[1,{"c":2}]}}`, `{"s":"\ud83d\ude00"}`, `{}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := lineage.CanonicalArgs(raw)
		if err != nil {
			return
		}
		again, err := lineage.CanonicalArgs(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("canonical form %s is not stable: %s, %v", c, again, err)
		}
	})
}
