package safetext

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	cases := []struct {
		name, in string
		mode     Mode
		want     string
		escaped  int
	}{
		{"plain text passes", "pay 123-456 €5 日本 🙂", Line, "pay 123-456 €5 日本 🙂", 0},
		{"a replacement character typed as such passes", "a\uFFFDb", Line, "a\uFFFDb", 0},
		{"NUL", "a\x00b", Line, `a\x00b`, 1},
		{"BEL and BS", "\a\b", Line, `\x07\x08`, 2},
		{"carriage return rewrites a line", "ok\rforged", Block, `ok\x0dforged`, 1},
		{"ESC sequence: cursor up, erase line", "hello\x1b[2A\x1b[2Kprincipal user:alice", Block, `hello\x1b[2A\x1b[2Kprincipal user:alice`, 2},
		{"DEL", "a\x7f", Line, `a\x7f`, 1},
		{"newline and tab on one line", "a\nb\tc", Line, `a\x0ab\x09c`, 2},
		{"newline and tab in a block", "a\nb\tc", Block, "a\nb\tc", 0},
		{"C1 NEL and CSI", "a\u0085b\u009bc", Block, `a\u0085b\u009bc`, 2},
		{"a lone 8-bit CSI byte", "a\x9b2Jb", Block, `a\x9b2Jb`, 1},
		{"invalid UTF-8", "a\xff\xc3", Line, `a\xff\xc3`, 2},
		{"bidi embeddings and overrides", "\u202a\u202b\u202c\u202d\u202e", Line, `\u202a\u202b\u202c\u202d\u202e`, 5},
		{"bidi isolates", "\u2066\u2067\u2068\u2069", Block, `\u2066\u2067\u2068\u2069`, 4},
		{"directional marks", "\u200e\u200f\u061c", Line, `\u200e\u200f\u061c`, 3},
		{"zero-width", "99\u200b9\u200c\u200d\ufeff\u2060-666", Line, `99\u200b9\u200c\u200d\ufeff\u2060-666`, 5},
		{"line and paragraph separators", "a\u2028b\u2029c", Block, `a\u2028b\u2029c`, 2},
		{"tag characters (hidden ASCII)", "ok\U000E0041\U000E007F", Line, `ok\U000e0041\U000e007f`, 2},
		{"soft hyphen and other Cf", "a\u00adb\u180e", Line, `a\u00adb\u180e`, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, n := Escape(c.in, c.mode)
			if got != c.want || n != c.escaped {
				t.Fatalf("Escape(%q) = %q, %d; want %q, %d", c.in, got, n, c.want, c.escaped)
			}
			if strings.ContainsAny(got, "\x1b\u009b\u202e") || !utf8.ValidString(got) {
				t.Fatalf("Escape(%q) left a raw control or invalid UTF-8: %q", c.in, got)
			}
		})
	}
}

func TestClipCutsOnACharacterBoundary(t *testing.T) {
	s := strings.Repeat("€", 10) // 3 bytes each
	for max := 0; max <= len(s)+1; max++ {
		got, left := Clip(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("Clip(%d) cut inside a character: %q", max, got)
		}
		if len(got) > max || len(got)+left != len(s) || (max < len(s) && len(got) < max-2) {
			t.Fatalf("Clip(%d) = %d bytes, %d left out, of %d", max, len(got), left, len(s))
		}
	}
	if got, left := Clip("abc", 3); got != "abc" || left != 0 {
		t.Fatalf("Clip of a short value: %q, %d", got, left)
	}
}

func TestWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	// A bidi override split across two writes, an ESC, a line kept whole.
	rlo := []byte("\u202e")
	w.Write([]byte("entry x\nname "))
	w.Write(rlo[:2])
	w.Write(append(rlo[2:], []byte("gnp.exe\x1b[2K\n")...))
	if got := w.Line("a\nb"); got != `a\x0ab` {
		t.Fatalf("Line = %q", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "entry x\nname \\u202egnp.exe\\x1b[2K\n(3 control characters shown escaped)\n"
	if out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}

	out.Reset()
	w = NewWriter(&out)
	w.Write([]byte("clean\n"))
	w.Close()
	if out.String() != "clean\n" {
		t.Fatalf("clean text changed or noted: %q", out.String())
	}

	// A character that never ends is shown as its bytes, after a newline
	// before the note when the text did not end a line.
	out.Reset()
	w = NewWriter(&out)
	w.Write([]byte("x\xe2\x80"))
	w.Close()
	if want := "x\\xe2\\x80\n(2 control characters shown escaped)\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// The cost of escaping a command's output: clean text (the common case)
// and text with a control character every 64 bytes.
func BenchmarkWriter(b *testing.B) {
	clean := []byte(strings.Repeat("Quarterly notes: pay 123-456 €5, see the report. ", 20000)) // ~1 MB
	dirty := []byte(strings.Repeat("Quarterly notes: pay 123-456 €5\x1b[2K see the\u202e report.  ", 20000))
	for name, text := range map[string][]byte{"clean": clean, "dirty": dirty} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				w := NewWriter(io.Discard)
				w.Write(text)
				w.Close()
			}
		})
	}
}

// FuzzEscape: whatever the input, the output is valid UTF-8 with no
// character a terminal acts on (but newlines and tabs in a block), it is
// the input when nothing was escaped, and a Writer fed the input in two
// pieces writes what Escape does, plus the note.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", evilSeed, "a\xe2\x80", "\xf0\x9f\x99\x82", "x\n\ty\r"} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		for _, m := range []Mode{Line, Block} {
			e, n := Escape(s, m)
			if !utf8.ValidString(e) || (n == 0) != (e == s) {
				t.Fatalf("Escape(%q, %d) = %q, %d", s, m, e, n)
			}
			for _, r := range e {
				if unsafe(r, m) {
					t.Fatalf("Escape(%q, %d) left %U", s, m, r)
				}
			}
		}
		if cut < 0 || cut > len(s) {
			cut = len(s) / 2
		}
		var out bytes.Buffer
		w := NewWriter(&out)
		w.Write([]byte(s[:cut]))
		w.Write([]byte(s[cut:]))
		w.Close()
		e, n := Escape(s, Block)
		want := e
		if n > 0 {
			if !strings.HasSuffix(e, "\n") {
				want += "\n"
			}
			want += Note(n) + "\n"
		}
		if out.String() != want {
			t.Fatalf("Writer(%q | %q) = %q, want %q", s[:cut], s[cut:], out.String(), want)
		}
	})
}

const evilSeed = "hello\x1b[2A\x1b[2K\u009b\u202e\u200b\U000E0041"

func TestMessage(t *testing.T) {
	for _, c := range []struct {
		in     string
		before int
		want   string
	}{
		{"pedigree denied x: clean.", 0, "pedigree denied x: clean."},
		{"failed: \x1b[2Kok\n", 0, `failed: \x1b[2Kok\x0a (2 control characters shown escaped)`},
		{"why.", 3, "why. (3 control characters shown escaped)"},
	} {
		if got := Message(c.in, c.before); got != c.want {
			t.Errorf("Message(%q, %d) = %q, want %q", c.in, c.before, got, c.want)
		}
	}
}
