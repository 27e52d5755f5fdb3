package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/cairn-dev/cairn/internal/jsontext"
)

// encodeValue encodes one update value. On failure the error names the
// JSON path of the value that could not be encoded.
func encodeValue(field string, v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	if n, common := commonSize(v); common {
		if b, ok := appendCommon(make([]byte, 0, n), v); ok {
			return b, nil
		}
	}
	b, err := json.Marshal(v)
	if err == nil {
		return b, nil
	}
	path, cause := findUnencodable(reflect.ValueOf(v), "/"+escapeToken(field), err)
	return nil, &FieldError{Path: path, Err: fmt.Errorf("%w: %v", ErrEncode, cause)}
}

// appendCommon appends the JSON of the value types updates carry most
// (strings, integers, booleans, nil, messages and lists of them) exactly as
// encoding/json writes them, without reflection; ok is false for any other
// value, which the caller encodes with encoding/json.
func appendCommon(b []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return jsontext.AppendString(b, x), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case bool:
		return strconv.AppendBool(b, x), true
	case Message:
		return appendMessage(b, &x)
	case []Message:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendMessage(b, &x[i]); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// commonSize reports whether appendCommon takes v's type, and about the
// size of its JSON, so that its buffer is allocated once (and not at all
// for a value left to encoding/json).
func commonSize(v any) (int, bool) {
	switch x := v.(type) {
	case nil, int, int64, bool:
		return 24, true
	case string:
		return len(x) + 2, true
	case Message:
		return messageSize(&x), true
	case []Message:
		n := 2
		for i := range x {
			n += messageSize(&x[i]) + 1
		}
		return n, true
	}
	return 0, false
}

func messageSize(m *Message) int {
	return len(m.ID) + len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID) + len(m.Type) + 80
}

// appendMessage appends m as encoding/json writes it, for a message
// without tool calls (whose raw JSON encoding/json checks and compacts).
func appendMessage(b []byte, m *Message) ([]byte, bool) {
	if len(m.ToolCalls) > 0 {
		return b, false
	}
	b = append(b, '{')
	first := true
	for _, f := range [...]struct{ key, val string }{
		{`"id":`, m.ID}, {`"role":`, m.Role}, {`"content":`, m.Content}, {`"name":`, m.Name},
		{`"tool_call_id":`, m.ToolCallID}, {`"type":`, m.Type},
	} {
		if f.val == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		b = jsontext.AppendString(b, f.val)
	}
	return append(b, '}'), true
}

// findUnencodable walks v to the deepest element that fails to encode and
// returns its JSON path. It runs only after an encoding failed.
func findUnencodable(v reflect.Value, path string, err error) (string, error) {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return path, err
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return path, err
	}
	if _, ok := v.Interface().(json.Marshaler); ok && v.CanInterface() {
		return path, err
	}
	try := func(c reflect.Value, p string) (string, error, bool) {
		if !c.CanInterface() {
			return "", nil, false
		}
		if _, e := json.Marshal(c.Interface()); e != nil {
			cp, ce := findUnencodable(c, p, e)
			return cp, ce, true
		}
		return "", nil, false
	}
	switch v.Kind() {
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			if p, e, bad := try(v.MapIndex(k), path+"/"+escapeToken(fmt.Sprint(k.Interface()))); bad {
				return p, e
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if p, e, bad := try(v.Index(i), path+"/"+strconv.Itoa(i)); bad {
				return p, e
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := jsonName(f)
			if name == "-" {
				continue
			}
			if p, e, bad := try(v.Field(i), path+"/"+escapeToken(name)); bad {
				return p, e
			}
		}
	}
	var ue *json.UnsupportedValueError
	if errors.As(err, &ue) {
		return path, fmt.Errorf("unsupported value %s", ue.Str)
	}
	return path, err
}

// jsonName is the JSON member name encoding/json uses for a struct field.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "-"
	}
	for i := 0; i < len(tag); i++ {
		if tag[i] == ',' {
			tag = tag[:i]
			break
		}
	}
	if tag == "" {
		return f.Name
	}
	return tag
}
