package main

import (
	"bufio"
	"bytes"
	"io"
)

// writeIndented writes compact, valid JSON indented by two spaces, as
// json.Indent would, a byte at a time through a buffer: a state of
// hundreds of megabytes is printed without copies of it in memory.
func writeIndented(w io.Writer, compact []byte) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	depth := 0
	newline := func() {
		bw.WriteByte('\n')
		for range depth {
			bw.WriteString("  ")
		}
	}
	inString, escaped := false, false
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		if inString && !escaped {
			// Copy the string up to its next quote or backslash at once.
			j := bytes.IndexAny(compact[i:], `"\\`)
			if j < 0 {
				j = len(compact) - i
			}
			if j > 0 {
				bw.Write(compact[i : i+j])
				i += j - 1
				continue
			}
		}
		if inString {
			bw.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			bw.WriteByte(c)
		case '{', '[':
			bw.WriteByte(c)
			if i+1 < len(compact) && (compact[i+1] == '}' || compact[i+1] == ']') {
				bw.WriteByte(compact[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			bw.WriteByte(c)
		case ',':
			bw.WriteByte(c)
			newline()
		case ':':
			bw.WriteString(": ")
		default:
			bw.WriteByte(c)
		}
	}
	bw.WriteByte('\n')
	return bw.Flush()
}
