package jsontext

import (
	"encoding/json"
	"math"
	"strconv"
)

// AppendString appends s as a JSON string, escaped as encoding/json escapes
// it (HTML characters, invalid UTF-8 and U+2028/U+2029 included).
func AppendString(b []byte, s string) []byte {
	if !needsEscape(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	enc, _ := json.Marshal(s) // a string always marshals
	return append(b, enc...)
}

// needsEscape reports whether s holds a byte that encoding/json would not
// copy as it is: a control character, a quote, a backslash, an HTML
// character or any byte outside printable ASCII.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return true
		}
	}
	return false
}

// AppendFloat appends f as encoding/json writes a float64. ok is false for
// the values it writes in exponent form or refuses (NaN, ±Inf): the caller
// encodes those with encoding/json.
func AppendFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return b, false
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), true
}
