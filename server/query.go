package server

import (
	"cmp"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// checkQuery refuses a query string a handler would misread, with a 422
// naming the parameter: a pair that does not parse (net/url drops those
// without a word: a bad %-escape, a ; between parameters), or a name or
// value that is not UTF-8 or holds a control character (NUL, a newline).
// No id, namespace, status, number or JSON filter has one.
func checkQuery(raw string) error {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return unprocessable("query", "%q: parameters are separated by &, not ; (a ; in a value is %%3B)", pair)
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return unprocessable("query", "parameter name %q: %v", k, err)
		}
		if fault := textFault(name); fault != "" {
			return unprocessable("query", "parameter name %q: %s", name, fault)
		}
		where := cmp.Or(name, "query")
		value, err := url.QueryUnescape(v)
		if err != nil {
			return unprocessable(where, "%q: %v", v, err)
		}
		if fault := textFault(value); fault != "" {
			return unprocessable(where, "%q: %s", value, fault)
		}
	}
	return nil
}

// textFault says what makes s unfit for a query parameter: bytes that
// are not UTF-8, or a control character; "" when there is none.
func textFault(s string) string {
	if i := invalidUTF8([]byte(s)); i >= 0 {
		return fmt.Sprintf("not UTF-8 at byte %d", i)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Sprintf("a control character (%U) at byte %d", r, i)
	}
	return ""
}

// invalidUTF8 is the offset of the first byte of b that is not part of a
// UTF-8 encoded character, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// queryBool reads a boolean query parameter: absent or empty is false;
// true, false, 1, 0 (strconv.ParseBool) are read; anything else is a 422.
func queryBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, unprocessable(name, "%q: want true or false", v)
	}
	return b, nil
}
