package lgsaver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// LangGraph names a subgraph's checkpoints by a namespace of segments
// joined by "|" ("outer:<task id>|inner:<task id>"); Cairn nests
// namespaces with "/". lgNamespace maps one to the other reversibly:
// segments are joined by "/", and in each segment a byte outside
// [A-Za-z0-9.:-] (and a first byte that is not a letter or digit) is
// written "_XX" in hex; an empty segment is "_". A result that would
// start with "_" starts with "0__" instead ("__" is never an escape).

// errLGNamespace: a Cairn namespace that no LangGraph namespace maps to.
var errLGNamespace = errors.New("not a namespace of the LangGraph checkpointer")

// lgNamespace is the Cairn namespace of a LangGraph checkpoint_ns.
func lgNamespace(ns string) (string, error) {
	if ns == "" {
		return "", nil
	}
	var b strings.Builder
	for i, seg := range strings.Split(ns, "|") {
		if i > 0 {
			b.WriteByte('/')
		}
		if seg == "" {
			b.WriteByte('_')
			continue
		}
		for j := 0; j < len(seg); j++ {
			c := seg[j]
			if alnumByte(c) || (j > 0 && (c == '.' || c == ':' || c == '-')) {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "_%02x", c)
			}
		}
	}
	out := b.String()
	if out[0] == '_' { // a namespace starts with a letter or digit; "__" is no escape
		out = "0_" + out
	}
	if err := store.ValidateNamespace(out); err != nil {
		return "", fmt.Errorf("checkpoint_ns %q is too long for Cairn once escaped (%d bytes, at most 256)", ns, len(out))
	}
	return out, nil
}

// lgNamespaceOf is the LangGraph checkpoint_ns of a Cairn namespace made
// by lgNamespace.
func lgNamespaceOf(ns string) (string, error) {
	if ns == "" {
		return "", nil
	}
	body := ns
	if strings.HasPrefix(ns, "0__") {
		body = ns[2:]
	}
	segs := strings.Split(body, "/")
	for i, seg := range segs {
		if seg == "_" {
			segs[i] = ""
			continue
		}
		var b strings.Builder
		for j := 0; j < len(seg); j++ {
			c := seg[j]
			if c != '_' {
				b.WriteByte(c)
				continue
			}
			if j+2 >= len(seg) {
				return "", fmt.Errorf("%w: %q: a lone _ in %q", errLGNamespace, ns, seg)
			}
			v, err := strconv.ParseUint(seg[j+1:j+3], 16, 8)
			if err != nil || seg[j+1:j+3] != strings.ToLower(seg[j+1:j+3]) {
				return "", fmt.Errorf("%w: %q: bad escape %q", errLGNamespace, ns, seg[j:j+3])
			}
			b.WriteByte(byte(v))
			j += 2
		}
		segs[i] = b.String()
	}
	out := strings.Join(segs, "|")
	if back, err := lgNamespace(out); err != nil || back != ns {
		return "", fmt.Errorf("%w: %q is not written as the checkpointer writes namespaces", errLGNamespace, ns)
	}
	return out, nil
}

func alnumByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
