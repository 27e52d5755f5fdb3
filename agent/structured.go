package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	gschema "github.com/google/jsonschema-go/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/readfile"
)

// Schema is a compiled JSON Schema for structured output or tool arguments.
type Schema struct {
	Name     string
	JSON     json.RawMessage // the schema document
	compiled *jsonschema.Schema
}

// SchemaFromJSON compiles a JSON Schema document (any draft).
func SchemaFromJSON(name string, doc []byte) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidSchema, name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://schema/" + strings.NewReplacer("/", "_", " ", "_").Replace(name) + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidSchema, name, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidSchema, name, err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidSchema, name, err)
	}
	return &Schema{Name: name, JSON: buf.Bytes(), compiled: compiled}, nil
}

// SchemaFromYAML compiles a schema written in YAML (inline schemas in agent
// files).
func SchemaFromYAML(name string, doc []byte) (*Schema, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidSchema, name, err)
	}
	b, err := json.Marshal(YAMLValue(v))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidSchema, name, err)
	}
	return SchemaFromJSON(name, b)
}

// YAMLValue turns a value decoded from YAML (maps may have non-string
// keys) into one encoding/json can encode. It changes v in place.
func YAMLValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = YAMLValue(x)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = YAMLValue(x)
		}
		return m
	case []any:
		for i, x := range t {
			t[i] = YAMLValue(x)
		}
		return t
	}
	return v
}

// SchemaFromFile reads a JSON (or, by extension .yaml/.yml, YAML) schema file.
func SchemaFromFile(path string) (*Schema, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	if strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml") {
		return SchemaFromYAML(path, b)
	}
	return SchemaFromJSON(path, b)
}

// SchemaFor derives a schema from a Go type.
func SchemaFor[T any]() (*Schema, error) {
	s, err := gschema.For[T](nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	var zero T
	return SchemaFromJSON(fmt.Sprintf("%T", zero), b)
}

// Issue is one validation failure, at a JSON pointer of the instance.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// SchemaError lists everything wrong with a value.
type SchemaError struct {
	Schema string
	Issues []Issue
}

func (e *SchemaError) Error() string {
	parts := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		parts[i] = fmt.Sprintf("at %s: %s", orRoot(is.Path), is.Message)
	}
	return fmt.Sprintf("%v %s: %s", ErrSchema, e.Schema, strings.Join(parts, "; "))
}

func (e *SchemaError) Unwrap() error { return ErrSchema }

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Validate checks a JSON value against the schema; the error lists every
// failure with its path.
func (s *Schema) Validate(value json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return &SchemaError{Schema: s.Name, Issues: []Issue{{Message: "not JSON: " + err.Error()}}}
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &SchemaError{Schema: s.Name, Issues: []Issue{{Message: err.Error()}}}
	}
	var issues []Issue
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil {
			issues = append(issues, Issue{Path: u.InstanceLocation, Message: u.Error.String()})
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.BasicOutput())
	sort.SliceStable(issues, func(i, j int) bool { return issues[i].Path < issues[j].Path })
	if len(issues) == 0 {
		issues = []Issue{{Message: ve.Error()}}
	}
	return &SchemaError{Schema: s.Name, Issues: dedupeIssues(issues)}
}

func dedupeIssues(in []Issue) []Issue {
	out := in[:0]
	seen := map[Issue]bool{}
	for _, is := range in {
		if !seen[is] {
			seen[is] = true
			out = append(out, is)
		}
	}
	return out
}

// FirstJSONObject returns the first balanced {...} in text, ignoring braces
// inside strings and escaped quotes.
func FirstJSONObject(text string) (string, error) {
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return "", ErrNoJSON
	}
	depth := 0
	inString, escaped := false, false
	for i := start; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return text[start : i+1], nil
			}
		}
	}
	return "", ErrUnbalancedJSON
}

// ParseStructured reads a model's reply as JSON valid against s: the whole
// reply first, then the first balanced JSON object in it.
func ParseStructured(s *Schema, reply string) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(reply)
	if json.Valid([]byte(trimmed)) {
		if err := s.Validate(json.RawMessage(trimmed)); err == nil {
			return compactJSON(trimmed), nil
		} else if strings.HasPrefix(trimmed, "{") {
			return nil, err
		}
	}
	obj, err := FirstJSONObject(reply)
	if err != nil {
		return nil, err
	}
	if !json.Valid([]byte(obj)) {
		return nil, fmt.Errorf("%w: %q is not valid JSON", ErrNoJSON, truncate(obj, 80))
	}
	if err := s.Validate(json.RawMessage(obj)); err != nil {
		return nil, err
	}
	return compactJSON(obj), nil
}

func compactJSON(s string) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(s)) != nil {
		return json.RawMessage(s)
	}
	return buf.Bytes()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// StructuredResult is the outcome of GenerateStructured.
type StructuredResult struct {
	Value     json.RawMessage
	Responses []Response // every attempt, in order
	Usage     Usage      // all attempts' tokens
}

// GenerateStructured asks the model for output valid against schema. When
// a reply does not validate it asks again, telling the model what was wrong,
// up to attempts times (at least 1). Every attempt's tokens are counted, and
// inside a flow node they count against the run's token budget.
func GenerateStructured(ctx context.Context, m Model, req Request, schema *Schema, attempts int) (StructuredResult, error) {
	if attempts < 1 {
		attempts = 1
	}
	req.Schema = schema
	msgs := append([]Message(nil), req.Messages...)
	var res StructuredResult
	var lastErr error
	for a := 1; a <= attempts; a++ {
		req.Messages = msgs
		resp, err := generateRecorded(ctx, m, req, "", "structured/"+strconv.Itoa(a))
		res.Usage = res.Usage.Add(resp.Usage)
		flow.AddTokens(ctx, resp.Usage.Input, resp.Usage.Output)
		if err != nil {
			return res, err
		}
		res.Responses = append(res.Responses, resp)
		v, perr := ParseStructured(schema, resp.Message.Content)
		if perr == nil {
			res.Value = v
			return res, nil
		}
		lastErr = perr
		msgs = append(msgs, resp.Message, Message{Role: RoleUser, Content: fmt.Sprintf(
			"Your reply was not valid: %v\nReply again with only a JSON object that matches the schema.", perr)})
	}
	return res, fmt.Errorf("after %d attempt(s): %w", attempts, lastErr)
}
