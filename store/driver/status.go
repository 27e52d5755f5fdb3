package driver

import (
	"fmt"
	"strings"
)

// Status is the outcome of a step.
type Status uint8

// Step statuses. The names follow the gate pipeline files.
const (
	StatusSuccess Status = iota + 1
	StatusPartial
	StatusFailed
	StatusInterrupted
)

var statusNames = [...]string{StatusSuccess: "SUCCESS", StatusPartial: "PARTIAL", StatusFailed: "FAILED", StatusInterrupted: "INTERRUPTED"}

func (s Status) String() string {
	if s.Valid() {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s >= StatusSuccess && s <= StatusInterrupted }

// ParseStatus reads a status name (case-insensitive).
func ParseStatus(name string) (Status, error) {
	for i, n := range statusNames {
		if n != "" && strings.EqualFold(n, name) {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown status %q (SUCCESS, PARTIAL, FAILED, INTERRUPTED)", ErrInvalidArgument, name)
}

// MarshalText writes the status name.
func (s Status) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: status %d", ErrInvalidArgument, uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a status name.
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
