package gate

import (
	"encoding/json"
	"fmt"
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
		// Few per input: json.Number's own check keeps the grammar exact.
		n, err := json.Marshal(json.Number(x))
		if err != nil {
			return nil, err
		}
		return append(b, n...), nil
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
