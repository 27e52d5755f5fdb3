package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
)

// encodeValue encodes one update value. On failure the error names the
// JSON path of the value that could not be encoded.
func encodeValue(field string, v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err == nil {
		return b, nil
	}
	path, cause := findUnencodable(reflect.ValueOf(v), "/"+escapeToken(field), err)
	return nil, &FieldError{Path: path, Err: fmt.Errorf("%w: %v", ErrEncode, cause)}
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
