package agentfile

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/internal/readfile"
)

// Input is what an agent works on.
type Input struct {
	Source  string          `json:"source"` // a path, "inline" or "handoff:<agent>"
	Kind    string          `json:"kind"`   // json or text
	Content json.RawMessage `json:"content"`
}

// ReadInput reads an input file: .json files are parsed as JSON, anything
// else is text.
func ReadInput(path string) (Input, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return Input{}, fmt.Errorf("%w: input: %w", ErrInvalidFile, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if !json.Valid(b) {
			return Input{}, &FileError{File: path, Msg: "input file is not valid JSON"}
		}
		return Input{Source: path, Kind: "json", Content: compactJSON(b)}, nil
	}
	return TextInput(path, string(b)), nil
}

// TextInput is inline or file text.
func TextInput(source, text string) Input {
	b, _ := json.Marshal(text) // a string always marshals
	return Input{Source: source, Kind: "text", Content: b}
}

func compactJSON(b []byte) json.RawMessage {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v) // decoded JSON always marshals
	return out
}
