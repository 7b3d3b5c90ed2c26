package gate

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// appendJSON writes v as JSON, byte for byte what json.Marshal(ast.JSON(v))
// writes (object keys sorted, HTML characters escaped, invalid UTF-8
// replaced), without building the map-of-interfaces in between: the logged
// input is encoded on every check. FuzzInputJSON holds the two equal.
func appendJSON(b []byte, v ast.Value) ([]byte, error) {
	switch x := v.(type) {
	case ast.Null:
		return append(b, "null"...), nil
	case ast.Boolean:
		if x {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case ast.Number:
		// json.Number writes a valid number as it is, an empty one as 0,
		// and refuses the rest.
		if x == "" {
			return append(b, '0'), nil
		}
		if !validNumber(string(x)) {
			return nil, fmt.Errorf("json: invalid number literal %q", string(x))
		}
		return append(b, x...), nil
	case ast.String:
		return appendJSONString(b, string(x)), nil
	case *ast.Array:
		b = append(b, '[')
		for i := range x.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, x.Elem(i).Value); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case ast.Object:
		b = append(b, '{')
		var err error
		first := true
		x.Until(func(k, val *ast.Term) bool {
			s, ok := k.Value.(ast.String)
			if !ok {
				err = fmt.Errorf("object key %v is not a string", k)
				return true
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, string(s))
			b = append(b, ':')
			b, err = appendJSON(b, val.Value)
			return err != nil
		})
		if err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("%T cannot be written as JSON", v)
}

// validNumber is encoding/json's number grammar (its isValidNumber),
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, on a non-empty s.
func validNumber(s string) bool {
	digits := func() { s = strings.TrimLeft(s, "0123456789") }
	s = strings.TrimPrefix(s, "-")
	switch {
	case s == "":
		return false
	case s[0] == '0':
		s = s[1:]
	case isDigit(s[0]):
		digits()
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && isDigit(s[1]) {
		s = s[1:]
		digits()
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
		}
		if s == "" || !isDigit(s[0]) {
			return false
		}
		digits()
	}
	return s == ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoding with HTML escaping,
// its default.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
