package safetext

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mode says which characters a layout keeps.
type Mode int

const (
	// Line escapes every control character, newline and tab included: the
	// value stays on the one line it is printed on.
	Line Mode = iota
	// Block keeps newlines and tabs: a document of several lines.
	Block
)

// unsafe reports whether a terminal could act on r instead of showing it:
// C0 and DEL, C1, the line and paragraph separators, and every format
// character (Cf: the bidirectional embeddings, overrides and isolates
// U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F/U+061C, the
// zero-width U+200B-U+200D, U+2060 and U+FEFF, the tag characters).
// U+200B is listed by name: Unicode classes it as Cf since 4.0.1, and a
// zero-width space must never pass whatever the tables say.
func unsafe(r rune, m Mode) bool {
	switch {
	case r == '\n' || r == '\t':
		return m == Line
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r < 0xa0:
		return false
	case r == 0x2028 || r == 0x2029 || r == 0x200b:
		return true
	}
	// Cc ends at U+009F; what is left is Cf.
	return unicode.Is(unicode.Cf, r)
}

// Escape returns s with every character a terminal could act on written as
// a visible escape, and how many it escaped: a byte below 0x80 as \xNN
// (\x1b for ESC), any other character as \uNNNN or \UNNNNNNNN, and a byte
// that is not part of valid UTF-8 as \xNN too (a lone 0x9b is CSI to a
// terminal that reads 8-bit controls).
func Escape(s string, m Mode) (string, int) {
	i := firstUnsafe(s, m)
	if i < 0 {
		return s, 0
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	n := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
			n++
		case unsafe(r, m):
			writeEscape(&b, r)
			n++
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String(), n
}

// firstUnsafe is the index of the first byte Escape must escape, or -1.
// Printable ASCII, the common case, is decided byte by byte.
func firstUnsafe(s string, m Mode) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || unsafe(r, m) {
			return i
		}
		i += size
	}
	return -1
}

// firstUnsafeBytes is firstUnsafe on bytes (a Writer's, not copied).
func firstUnsafeBytes(p []byte, m Mode) int {
	for i := 0; i < len(p); {
		c := p[i]
		if c >= 0x20 && c < 0x7f || c == '\n' && m == Block {
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if (r == utf8.RuneError && size <= 1) || unsafe(r, m) {
			return i
		}
		i += size
	}
	return -1
}

func writeEscape(b *strings.Builder, r rune) {
	switch {
	case r < 0x80:
		writeHex(b, `\x`, uint32(r), 2)
	case r <= 0xffff:
		writeHex(b, `\u`, uint32(r), 4)
	default:
		writeHex(b, `\U`, uint32(r), 8)
	}
}

// writeHex writes prefix and v in digits lowercase hex digits.
func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for shift := (digits - 1) * 4; shift >= 0; shift -= 4 {
		b.WriteByte(hex[v>>uint(shift)&0xf])
	}
}

// Note is what a printer adds after text in which it escaped n characters
// ("" when it escaped none).
func Note(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "(1 control character shown escaped)"
	}
	return fmt.Sprintf("(%d control characters shown escaped)", n)
}

// Message is s escaped for one line (Escape in Line mode), followed by the
// Note for what it escaped and for before more characters escaped in text
// shown with it (an exact view printed above it): a message a host shows a
// person, part of which an upstream or content wrote.
func Message(s string, before int) string {
	s, n := Escape(s, Line)
	if note := Note(before + n); note != "" {
		s += " " + note
	}
	return s
}

// Clip shortens s to at most max bytes, cut at a character boundary, and
// returns how many bytes it left out (0: s is whole).
func Clip(s string, max int) (string, int) {
	if len(s) <= max {
		return s, 0
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], len(s) - cut
}

// Writer escapes what is written through it in Block mode and counts what
// it escaped; Close writes the Note, on a line of its own, when there is
// one. A character split across two writes is held until the second.
type Writer struct {
	w    io.Writer
	n    int
	held []byte
	err  error
	// atLineStart: what was written so far ends a line (or is nothing).
	atLineStart bool
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, atLineStart: true} }

// Write escapes p and writes it. It reports len(p) on success: the bytes
// taken, not those written.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	buf := p
	if len(w.held) > 0 {
		buf = append(w.held, p...)
		w.held = nil
	}
	// Hold back an incomplete last character: the next write ends it.
	if tail := incomplete(buf); tail > 0 {
		w.held = append([]byte(nil), buf[len(buf)-tail:]...)
		buf = buf[:len(buf)-tail]
	}
	w.write(buf)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

func (w *Writer) write(p []byte) {
	if w.err != nil || len(p) == 0 {
		return
	}
	w.atLineStart = p[len(p)-1] == '\n'
	i := firstUnsafeBytes(p, Block)
	if i < 0 {
		_, w.err = w.w.Write(p)
		return
	}
	e, n := Escape(string(p[i:]), Block)
	w.n += n
	if _, w.err = w.w.Write(p[:i]); w.err == nil {
		_, w.err = io.WriteString(w.w, e)
	}
}

// Line escapes s for one line of the output (Escape in Line mode), counted
// in the note.
func (w *Writer) Line(s string) string {
	e, n := Escape(s, Line)
	w.n += n
	return e
}

// Count adds n characters escaped elsewhere (by Escape) to the note.
func (w *Writer) Count(n int) { w.n += n }

// Escaped is how many characters the Writer escaped so far.
func (w *Writer) Escaped() int { return w.n }

// Close writes what is held (a character never completed is escaped as
// bytes) and the note. It does not close the underlying writer.
func (w *Writer) Close() error {
	held := w.held
	w.held = nil
	w.write(held)
	if note := Note(w.n); note != "" && w.err == nil {
		sep := "\n"
		if w.atLineStart {
			sep = ""
		}
		_, w.err = io.WriteString(w.w, sep+note+"\n")
	}
	return w.err
}

// incomplete is the length of a UTF-8 sequence that b ends with and that
// more bytes could still complete (0 when none).
func incomplete(b []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		c := b[len(b)-k]
		if !utf8.RuneStart(c) {
			continue
		}
		if c < 0x80 {
			return 0
		}
		need := 0
		switch {
		case c&0xe0 == 0xc0:
			need = 2
		case c&0xf0 == 0xe0:
			need = 3
		case c&0xf8 == 0xf0:
			need = 4
		}
		if need > k {
			return k
		}
		return 0
	}
	return 0
}
