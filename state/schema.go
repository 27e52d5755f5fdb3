package state

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Schema declares the top-level fields of a state and the reducer of each.
// Fields not declared use replace, unless the schema is strict. A Schema is
// safe for concurrent use once built.
type Schema struct {
	fields   map[string]string
	reducers map[string]reducer
	// hasMessages: a field uses the messages reducer (WithMessageIDs).
	hasMessages bool
	strict      bool
	version     int
	migr        *Migrations
}

// SchemaOption configures a Schema.
type SchemaOption func(*Schema) error

// NewSchema returns a schema with the built-in reducers and the given
// options applied.
func NewSchema(opts ...SchemaOption) (*Schema, error) {
	s := &Schema{
		fields: map[string]string{},
		reducers: map[string]reducer{
			ReducerReplace:  reduceReplace,
			ReducerAppend:   reduceAppend,
			ReducerMessages: reduceMessages,
			ReducerMerge:    reduceMerge,
			ReducerAdd:      reduceAdd,
		},
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	for f, r := range s.fields {
		if _, ok := s.reducers[r]; !ok {
			return nil, fmt.Errorf("%w: field %q uses %q", ErrUnknownReducer, f, r)
		}
		s.hasMessages = s.hasMessages || r == ReducerMessages
	}
	return s, nil
}

// MustSchema is NewSchema for schemas fixed in code; it panics on error.
func MustSchema(opts ...SchemaOption) *Schema {
	s, err := NewSchema(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// WithField declares a field and its reducer.
func WithField(name, reducerName string) SchemaOption {
	return func(s *Schema) error {
		if name == "" {
			return fmt.Errorf("%w: empty field name", ErrUnknownField)
		}
		if reducerName == "" {
			reducerName = ReducerReplace
		}
		s.fields[name] = reducerName
		return nil
	}
}

// WithReducer registers a custom reducer under a name fields can use.
func WithReducer(name string, fn ReducerFunc) SchemaOption {
	return func(s *Schema) error {
		if name == "" || fn == nil {
			return fmt.Errorf("%w: a custom reducer needs a name and a function", ErrUnknownReducer)
		}
		if _, builtin := s.reducers[name]; builtin {
			return fmt.Errorf("%w: %q is already registered", ErrUnknownReducer, name)
		}
		s.reducers[name] = customReducer(fn)
		return nil
	}
}

// Strict makes updates to undeclared fields an error.
func Strict() SchemaOption {
	return func(s *Schema) error { s.strict = true; return nil }
}

// WithMigrations attaches a schema version and its migrations; documents
// loaded through the schema are migrated to the current version.
func WithMigrations(m *Migrations) SchemaOption {
	return func(s *Schema) error { s.migr = m; s.version = m.Current(); return nil }
}

// Reducer returns the reducer name of a field ("replace" when undeclared).
func (s *Schema) Reducer(field string) string {
	if r, ok := s.fields[field]; ok {
		return r
	}
	return ReducerReplace
}

// Fields returns the declared fields, sorted.
func (s *Schema) Fields() []string {
	out := make([]string, 0, len(s.fields))
	for f := range s.fields {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Migrations returns the attached migrations, or nil.
func (s *Schema) Migrations() *Migrations { return s.migr }

// Update is a partial state: field name → new value for the field's
// reducer. Values are any JSON-encodable Go value, or json.RawMessage.
type Update map[string]any

// ApplyOptions tune one application of an update.
type ApplyOptions struct {
	// NewID returns an id for a message that has none. Runners pass a
	// deterministic generator so a replayed step produces the same ids;
	// the default draws random ids.
	NewID func() string
}

// Apply merges the update into doc through the field reducers and returns
// the new document and the patch that turns doc into it. Fields are applied
// in sorted order, so the result is deterministic. doc is unchanged.
func (s *Schema) Apply(doc Doc, upd Update, opts ...ApplyOptions) (Doc, Patch, error) {
	raw := make(map[string]json.RawMessage, len(upd))
	compacted := true
	for k, v := range upd {
		b, err := encodeValue(k, v)
		if err != nil {
			return Doc{}, nil, err
		}
		if _, given := v.(json.RawMessage); given {
			compacted = false
		}
		raw[k] = b
	}
	return s.apply(doc, raw, compacted, opts)
}

// ApplyJSON is Apply with values already encoded as JSON.
func (s *Schema) ApplyJSON(doc Doc, upd map[string]json.RawMessage, opts ...ApplyOptions) (Doc, Patch, error) {
	return s.apply(doc, upd, false, opts)
}

// apply does the work; compacted says the values are compact JSON already
// (encoding/json's output always is).
func (s *Schema) apply(doc Doc, upd map[string]json.RawMessage, compacted bool, opts []ApplyOptions) (Doc, Patch, error) {
	a := &applier{}
	if len(opts) > 0 {
		a.newID = opts[0].NewID
	}
	keys := make([]string, 0, len(upd))
	for k := range upd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cur, owned := doc, false
	for _, k := range keys {
		rname, declared := s.fields[k]
		if !declared {
			if s.strict {
				return Doc{}, nil, &FieldError{Path: "/" + escapeToken(k), Err: ErrUnknownField}
			}
			rname = ReducerReplace
		}
		val := upd[k]
		if !compacted {
			var err error
			if val, err = compact(val); err != nil {
				return Doc{}, nil, &FieldError{Path: "/" + escapeToken(k), Err: err}
			}
		}
		old := cur.fields[k]
		nv, err := s.reducers[rname](a, k, old, val)
		if err != nil {
			return Doc{}, nil, &FieldError{Path: "/" + escapeToken(k), Err: err}
		}
		switch {
		case nv == old:
		case owned:
			cur.set(k, nv)
		default:
			cur, owned = cur.with(k, nv), true
		}
	}
	return cur, a.ops, nil
}
