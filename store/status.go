package store

import "github.com/cairn-dev/cairn/store/driver"

// Status is the outcome of a step: SUCCESS, PARTIAL, FAILED or
// INTERRUPTED (String; ParseStatus reads the names, case-insensitive).
type Status = driver.Status

// Step statuses. The names follow the gate pipeline files.
const (
	StatusSuccess     = driver.StatusSuccess
	StatusPartial     = driver.StatusPartial
	StatusFailed      = driver.StatusFailed
	StatusInterrupted = driver.StatusInterrupted
)

// ParseStatus reads a status name (case-insensitive).
func ParseStatus(name string) (Status, error) { return driver.ParseStatus(name) }
