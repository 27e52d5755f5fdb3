package state

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// scanMembers reads the string values of the top-level members id and type
// of a compact JSON object without decoding the rest. ok is false when the
// text is not an object or a needed token has escapes; callers then fall
// back to encoding/json. Values that are not strings are reported absent,
// except that a non-string id makes ok false.
func scanMembers(raw []byte) (id string, hasID bool, typ string, ok bool) {
	if len(raw) < 2 || raw[0] != '{' {
		return "", false, "", false
	}
	i := 1
	for i < len(raw) && raw[i] != '}' {
		if raw[i] == ',' {
			i++
		}
		key, n, plain := scanString(raw, i)
		if n < 0 || !plain {
			return "", false, "", false
		}
		i = n
		if i >= len(raw) || raw[i] != ':' {
			return "", false, "", false
		}
		i++
		if key == "id" || key == "type" {
			if i >= len(raw) || raw[i] != '"' {
				if key == "id" {
					if i+4 <= len(raw) && string(raw[i:i+4]) == "null" {
						i = skipValue(raw, i)
						if i < 0 {
							return "", false, "", false
						}
						continue
					}
					return "", false, "", false
				}
				if i = skipValue(raw, i); i < 0 {
					return "", false, "", false
				}
				continue
			}
			val, n, plain := scanString(raw, i)
			if n < 0 || !plain {
				return "", false, "", false
			}
			i = n
			if key == "id" {
				id, hasID = val, true
			} else {
				typ = val
			}
			continue
		}
		if i = skipValue(raw, i); i < 0 {
			return "", false, "", false
		}
	}
	return id, hasID, typ, i < len(raw)
}

// scanString reads the JSON string starting at raw[i] ('"'). It returns the
// string, the index after it, and whether it had no escapes (only then is
// the returned string its value).
func scanString(raw []byte, i int) (string, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", -1, false
	}
	plain := true
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			plain = false
			j++
		case '"':
			seg := raw[i+1 : j]
			return string(seg), j + 1, plain && utf8.Valid(seg)
		}
	}
	return "", -1, false
}

// skipValue returns the index after the compact JSON value at raw[i].
func skipValue(raw []byte, i int) int {
	if i >= len(raw) {
		return -1
	}
	switch raw[i] {
	case '"':
		_, n, _ := scanString(raw, i)
		return n
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				_, n, _ := scanString(raw, j)
				if n < 0 {
					return -1
				}
				j = n - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case ',', '}', ']':
				return j
			}
		}
		return len(raw)
	}
}

// readHead returns a message's id and type, by scanning when possible.
func readHead(raw json.RawMessage) (messageHead, error) {
	if id, hasID, typ, ok := scanMembers(raw); ok {
		h := messageHead{Type: typ}
		if hasID {
			h.ID = &id
		}
		return h, nil
	}
	return readHeadExact(raw)
}

// readHeadExact decodes id and type with exact (case-sensitive) keys, as
// JSON means them; encoding/json's struct decoding would match "ID" too.
func readHeadExact(raw json.RawMessage) (messageHead, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return messageHead{}, err
	}
	var h messageHead
	if v, ok := m["id"]; ok && string(v) != "null" {
		var id string
		if err := json.Unmarshal(v, &id); err != nil {
			return messageHead{}, fmt.Errorf("message id must be a string: %v", err)
		}
		h.ID = &id
	}
	if v, ok := m["type"]; ok {
		_ = json.Unmarshal(v, &h.Type) // a non-string type is no marker
	}
	return h, nil
}
