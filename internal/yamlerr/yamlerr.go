package yamlerr

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

var (
	lineRE    = regexp.MustCompile(`line (\d+): (.*)`)
	unknownRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// Where returns the file line of a YAML error (0 when the error names
// none) and its message; the YAML starts offset lines into the file.
func Where(err error, offset int) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &line)
		return line + offset, strings.TrimSpace(m[2])
	}
	return 0, strings.TrimSpace(msg)
}

// UnknownKey reads a strict-decoding error: the unknown key and the file
// line where mapping n has it (0 when n does not), ok false for other
// errors.
func UnknownKey(err error, n *yaml.Node, offset int) (key string, line int, ok bool) {
	m := unknownRE.FindStringSubmatch(err.Error())
	if m == nil {
		return "", 0, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == m[1] {
			return m[1], n.Content[i].Line + offset, true
		}
	}
	return m[1], 0, true
}
