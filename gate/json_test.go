package gate

import (
	"encoding/json"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// reference is how the logged input used to be written.
func reference(v ast.Value) ([]byte, error) {
	j, err := ast.JSON(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, src := range []string{
		`{"b": [1, 2.5, -0.0, 1e400, 123456789012345678901234567890], "a": {"z": null, "y": true, "x": false}}`,
		`{"s": "<tag> & \"quote\" \\ \n\r\t\b\f \u0001 \u001f \u2028 \u2029 é 😀 \u007f"}`,
		`{"": [], "k": {}, "nested": [[[{"a": "b"}]]]}`,
	} {
		v := ast.MustParseTerm(src).Value
		want, err := reference(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendJSON(nil, v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s:\n got %s, %v\nwant %s", src, got, err, want)
		}
	}
	// Invalid UTF-8 in a string, which JSON text cannot carry in.
	v := ast.NewObject([2]*ast.Term{ast.StringTerm("k"), ast.StringTerm("a\xffb\x80c\xc3")})
	want, _ := reference(v)
	if got, err := appendJSON(nil, v); err != nil || string(got) != string(want) {
		t.Fatalf("invalid UTF-8: got %s, want %s", got, want)
	}
	// What JSON cannot hold is an error, not a guess.
	for _, bad := range []string{`{1: "a"}`, `{"a": x}`, `{"a": {1, 2}}`} {
		if _, err := appendJSON(nil, ast.MustParseTerm(bad).Value); err == nil {
			t.Fatalf("%s: no error", bad)
		}
	}
}

// FuzzInputJSON holds appendJSON byte-equal to json.Marshal(ast.JSON(v)) on
// any JSON document, so decision input digests do not depend on the encoder.
func FuzzInputJSON(f *testing.F) {
	f.Add([]byte(`{"a": [1, "x<y", {"b": null}], "c": 1.5e3}`))
	f.Add([]byte(`"\u2028\ud800"`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var x any
		if err := json.Unmarshal(doc, &x); err != nil {
			return
		}
		v, err := ast.InterfaceToValue(x)
		if err != nil {
			return
		}
		want, err := reference(v)
		if err != nil {
			return
		}
		got, err := appendJSON(nil, v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("got %s, %v; want %s", got, err, want)
		}
	})
}

// TestNumbersAsJSONWritesThem: a number is written as it is exactly when
// encoding/json would write it; anything else (a number OPA holds that is
// not JSON's) is an error, never a guess.
func TestNumbersAsJSONWritesThem(t *testing.T) {
	for _, s := range numberCases {
		checkNumber(t, s)
	}
}

var numberCases = []string{
	"0", "-0", "1", "-1", "12", "0.5", "-0.5", "1.25e3", "1E3", "1e+3", "1e-3", "120", "3.0",
	"9", "1.9", "19.09", "1e9", "0.09", "1.0e-9", "-9e+9",
	"", "-", "01", "1.", ".5", "/", ":", "1./", "1.:", "1e/", "1e:", "1e+:", "-:", "1:", "0:", "1e", "1e+", "+1", "1.e3", "0x10", "1_0", "--1", "1e3.5", "NaN", "Inf", " 1", "1 ", "00", "-01", "1.5e", "1ee3",
}

func checkNumber(t *testing.T, s string) {
	t.Helper()
	want, werr := json.Marshal(json.Number(s))
	got, gerr := appendJSON(nil, ast.Number(s))
	if (werr == nil) != (gerr == nil) || string(got) != string(want) {
		t.Fatalf("number %q: got %s, %v; encoding/json %s, %v", s, got, gerr, want, werr)
	}
}

func FuzzNumberJSON(f *testing.F) {
	for _, s := range numberCases {
		f.Add(s)
	}
	f.Fuzz(checkNumber)
}

// TestFeatureNumbersKeepTheirText: the input's numbers (the trajectory
// features) read as FloatNumberTerm writes them, so a logged input and its
// digest are the same however the gate builds the term.
func TestFeatureNumbersKeepTheirText(t *testing.T) {
	for _, v := range []float64{0, 1, 2, 511, 512, 999999, 1e6, 1e6 + 1, -1, -999999, -1e6, 0.5, -0.5, 2.25, 1e21, 1e-7} {
		if got, want := number(v).String(), ast.FloatNumberTerm(v).String(); got != want {
			t.Errorf("%v: %s, want %s", v, got, want)
		}
	}
}
