package main

import (
	"bufio"
	"bytes"
	"io"
)

// writeIndented writes compact, valid JSON indented by two spaces, as
// json.Indent would.
func writeIndented(w io.Writer, compact []byte) error {
	ind := newIndenter(w)
	if _, err := ind.Write(compact); err != nil {
		return err
	}
	return ind.Close()
}

// indenter is an io.Writer that indents the compact, valid JSON written to
// it by two spaces, as json.Indent would, however it is cut into writes:
// a state of hundreds of megabytes is printed as it is encoded, without a
// copy of it in memory. Close ends the text with a newline and flushes.
type indenter struct {
	bw      *bufio.Writer
	depth   int
	inStr   bool
	escaped bool
	open    bool // the last byte opened an object or array: an empty one closes next
}

func newIndenter(w io.Writer) *indenter {
	return &indenter{bw: bufio.NewWriterSize(w, 64<<10)}
}

func (ind *indenter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		if ind.inStr && !ind.escaped {
			// Copy the string up to its next quote or backslash at once.
			j := bytes.IndexAny(p[i:], `"\\`)
			if j < 0 {
				j = len(p) - i
			}
			if j > 0 {
				ind.bw.Write(p[i : i+j])
				i += j - 1
				continue
			}
		}
		ind.byte(p[i])
	}
	return len(p), nil
}

func (ind *indenter) byte(c byte) {
	if ind.inStr {
		ind.bw.WriteByte(c)
		switch {
		case ind.escaped:
			ind.escaped = false
		case c == '\\':
			ind.escaped = true
		case c == '"':
			ind.inStr = false
		}
		return
	}
	if ind.open {
		ind.open = false
		if c == '}' || c == ']' {
			ind.bw.WriteByte(c) // an empty object or array stays on its line
			return
		}
		ind.depth++
		ind.newline()
	}
	switch c {
	case '"':
		ind.inStr = true
		ind.bw.WriteByte(c)
	case '{', '[':
		ind.bw.WriteByte(c)
		ind.open = true
	case '}', ']':
		ind.depth--
		ind.newline()
		ind.bw.WriteByte(c)
	case ',':
		ind.bw.WriteByte(c)
		ind.newline()
	case ':':
		ind.bw.WriteString(": ")
	default:
		ind.bw.WriteByte(c)
	}
}

func (ind *indenter) newline() {
	ind.bw.WriteByte('\n')
	for range ind.depth {
		ind.bw.WriteString("  ")
	}
}

// Close ends the text with a newline and flushes it.
func (ind *indenter) Close() error {
	ind.bw.WriteByte('\n')
	return ind.bw.Flush()
}
