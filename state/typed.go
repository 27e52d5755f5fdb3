package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Validator is implemented by typed states that check themselves after
// decoding (the built-in fields do, through Base).
type Validator interface {
	Validate() error
}

// Typed binds a Go struct type to a state schema. The struct's exported
// fields are the state's fields, named by their json tags; a field's reducer
// is given by its cairn tag, e.g.
//
//	type ChatState struct {
//		state.Base
//		Messages []state.Message `json:"messages" cairn:"messages"`
//		Count    int             `json:"count"`
//	}
//
// Embedded structs are flattened, as encoding/json does.
type Typed[S any] struct {
	schema *Schema
}

// NewTyped derives the schema of S. Extra options (custom reducers,
// migrations, strictness) are applied after the fields from the tags.
func NewTyped[S any](opts ...SchemaOption) (*Typed[S], error) {
	t := reflect.TypeFor[S]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: typed state must be a struct, got %s", ErrInvalidDoc, t)
	}
	var fieldOpts []SchemaOption
	if err := collectFields(t, &fieldOpts, map[string]string{}); err != nil {
		return nil, err
	}
	s, err := NewSchema(append(fieldOpts, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Typed[S]{schema: s}, nil
}

func collectFields(t reflect.Type, out *[]SchemaOption, seen map[string]string) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := jsonName(f)
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && f.Tag.Get("json") == "" && ft.Kind() == reflect.Struct {
			if err := collectFields(ft, out, seen); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if prev, dup := seen[name]; dup {
			return fmt.Errorf("%w: json name %q used by %s and %s", ErrInvalidDoc, name, prev, f.Name)
		}
		seen[name] = f.Name
		*out = append(*out, WithField(name, f.Tag.Get("cairn")))
	}
	return nil
}

// Schema returns the derived schema.
func (t *Typed[S]) Schema() *Schema { return t.schema }

// Decode reads a document into S: it migrates the document when the schema
// has migrations, decodes it (numbers keep their exact value) and validates
// it when S implements Validator. Errors name the field path.
func (t *Typed[S]) Decode(d Doc) (S, error) { return t.decode(d, false) }

// DecodeStrict is Decode that also rejects fields S does not declare.
func (t *Typed[S]) DecodeStrict(d Doc) (S, error) { return t.decode(d, true) }

func (t *Typed[S]) decode(d Doc, strict bool) (S, error) {
	var s S
	if m := t.schema.migr; m != nil {
		md, err := m.Migrate(d)
		if err != nil {
			return s, err
		}
		d = md
	}
	dec := json.NewDecoder(bytes.NewReader(d.AppendJSON(nil)))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&s); err != nil {
		return s, decodeError(err)
	}
	if v, ok := any(&s).(Validator); ok {
		if err := v.Validate(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// decodeError turns encoding/json errors into FieldErrors with paths.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		path := "/"
		if te.Field != "" {
			path = "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		return &FieldError{Path: path, Err: fmt.Errorf("%w: cannot put JSON %s into Go %s", ErrDecode, te.Value, te.Type)}
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		name := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return &FieldError{Path: "/" + escapeToken(name), Err: ErrUnknownField}
	}
	return fmt.Errorf("%w: %v", ErrDecode, err)
}

// Encode turns a typed state into a document. Errors name the field path.
func (t *Typed[S]) Encode(s S) (Doc, error) {
	b, err := json.Marshal(s)
	if err != nil {
		path, cause := findUnencodable(reflect.ValueOf(s), "", err)
		if path == "" {
			path = "/"
		}
		return Doc{}, &FieldError{Path: path, Err: fmt.Errorf("%w: %v", ErrEncode, cause)}
	}
	return ParseDoc(b)
}

// Apply merges an update into a document through the schema's reducers.
func (t *Typed[S]) Apply(d Doc, upd Update, opts ...ApplyOptions) (Doc, Patch, error) {
	return t.schema.Apply(d, upd, opts...)
}
