package state

import (
	"encoding/json"
	"fmt"
)

// VersionField is the built-in field that records a state's schema version.
const VersionField = "schema_version"

// MigrationFunc turns a document of one schema version into the next.
type MigrationFunc func(Doc) (Doc, error)

// Migrations is a registry of one-step migrations up to a current version.
// Build it once at start-up; it is safe for concurrent use afterwards.
type Migrations struct {
	current int
	steps   map[int]MigrationFunc
}

// NewMigrations returns a registry whose current schema version is current
// (at least 1).
func NewMigrations(current int) *Migrations {
	if current < 1 {
		current = 1
	}
	return &Migrations{current: current, steps: map[int]MigrationFunc{}}
}

// Current is the schema version this code writes.
func (m *Migrations) Current() int { return m.current }

// Register adds the migration from version from to from+1.
func (m *Migrations) Register(from int, fn MigrationFunc) error {
	if from < 1 || from >= m.current {
		return fmt.Errorf("%w: step %d→%d is outside 1→%d", ErrMissingMigration, from, from+1, m.current)
	}
	if fn == nil {
		return fmt.Errorf("%w: step %d→%d has no function", ErrMissingMigration, from, from+1)
	}
	if _, dup := m.steps[from]; dup {
		return fmt.Errorf("%w: step %d→%d registered twice", ErrMissingMigration, from, from+1)
	}
	m.steps[from] = fn
	return nil
}

// Version reads a document's schema version; a document without one is at
// version 1.
func Version(d Doc) (int, error) {
	raw, ok := d.Raw(VersionField)
	if !ok || string(raw) == "null" {
		return 1, nil
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < 1 {
		return 0, &FieldError{Path: "/" + VersionField, Err: fmt.Errorf("%w: %s is not a positive integer", ErrUnknownVersion, raw)}
	}
	return v, nil
}

// Migrate brings d to the current version, one registered step at a time,
// setting schema_version after each. A version newer than current is
// ErrUnknownVersion; a gap is ErrMissingMigration. d is unchanged.
func (m *Migrations) Migrate(d Doc) (Doc, error) {
	v, err := Version(d)
	if err != nil {
		return Doc{}, err
	}
	if v > m.current {
		return Doc{}, fmt.Errorf("%w: state is at version %d, this code knows up to %d", ErrUnknownVersion, v, m.current)
	}
	for ; v < m.current; v++ {
		fn, ok := m.steps[v]
		if !ok {
			return Doc{}, fmt.Errorf("%w: no migration from version %d to %d", ErrMissingMigration, v, v+1)
		}
		nd, err := fn(d)
		if err != nil {
			return Doc{}, fmt.Errorf("migrate %d→%d: %w", v, v+1, err)
		}
		d = nd.with(VersionField, &value{raw: json.RawMessage(fmt.Sprint(v + 1))})
	}
	return d, nil
}

// ApplyNoPatch is Apply for callers that need only the new document, such
// as migrations.
func (s *Schema) ApplyNoPatch(d Doc, upd Update) (Doc, error) {
	nd, _, err := s.Apply(d, upd)
	return nd, err
}
