package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// decodeBody reads a JSON request body into v (a pointer to a struct). An
// empty body is an empty object. A body over the size limit is a 413; bad
// JSON, a field v does not have or a value of the wrong type is a 422 that
// says where ($.config.recursion_limit).
func decodeBody(r *http.Request, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeJSON(data, v)
}

// readBody reads a request body: over the size limit is a 413.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
		return nil, &apiError{Status: http.StatusBadRequest, Msg: "reading the request body: " + err.Error()}
	}
	return data, nil
}

// decodeJSON is decodeBody's check of the bytes.
func decodeJSON(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if i := invalidUTF8(data); i >= 0 {
		return unprocessable(jsonPathAt(data, int64(i)), "invalid UTF-8 at byte %d: JSON text is UTF-8", i)
	}
	if !json.Valid(data) {
		var x any
		err := json.Unmarshal(data, &x)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return unprocessable("$", "invalid JSON at byte %d: %v", se.Offset, se)
		}
		return unprocessable("$", "invalid JSON: %v", err)
	}
	if err := checkFields(data, reflect.TypeOf(v), "$"); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			path := "$"
			if te.Field != "" {
				path += "." + te.Field
			}
			return unprocessable(path, "want %s, got a JSON %s", friendlyType(te.Type), te.Value)
		}
		var fe *fieldError
		if errors.As(err, &fe) {
			return unprocessable(fe.path, "%s", fe.msg)
		}
		return unprocessable("$", "%v", err)
	}
	return nil
}

// jsonLevel is an object or array jsonPathAt is in.
type jsonLevel struct {
	path    string
	obj     bool
	key     string // an object's last key
	keyNext bool   // in an object: the next string is a key
	n       int    // an array's values so far
}

// next returns the path of the value the level reads next, and counts it.
func (l *jsonLevel) next() string {
	if l.obj {
		l.keyNext = true
		return l.path + "." + l.key
	}
	l.n++
	return fmt.Sprintf("%s[%d]", l.path, l.n-1)
}

// jsonPathAt returns the path of the string of data that holds byte off
// ($.metadata.name, $.items[2]; an object key: the path it names), or "$"
// when data is not JSON that far.
func jsonPathAt(data []byte, off int64) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var levels []jsonLevel
	next := func() string {
		if len(levels) == 0 {
			return "$"
		}
		return levels[len(levels)-1].next()
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "$"
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				levels = append(levels, jsonLevel{path: next(), obj: t == '{', keyNext: t == '{'})
			} else {
				levels = levels[:len(levels)-1]
			}
		case string:
			if l := len(levels) - 1; l >= 0 && levels[l].keyNext {
				levels[l].key, levels[l].keyNext = t, false
				if dec.InputOffset() > off {
					return levels[l].path + "." + t
				}
				continue
			}
			if p := next(); dec.InputOffset() > off {
				return p
			}
		default:
			next()
		}
	}
}

var (
	rawType         = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkFields walks data beside type t and reports the first object key
// that t has no field for. Values of the wrong type are left to the
// decoder, which reports them with their path.
func checkFields(data []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				return unprocessable(path+"."+k, "unknown field %q (known: %s)", k, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
			if err := checkFields(m[k], ft, path+"."+k); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var l []json.RawMessage
		if json.Unmarshal(data, &l) != nil {
			return nil
		}
		for i, e := range l {
			if err := checkFields(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		for k, e := range m {
			if err := checkFields(e, t.Elem(), path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps a struct's JSON names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func friendlyType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// fieldError is a value a custom decoder refused, with where it was.
type fieldError struct{ path, msg string }

func (e *fieldError) Error() string { return e.path + ": " + e.msg }
