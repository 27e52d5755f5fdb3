package lgsaver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/state"
)

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// lgPatch is the patch that sets the channels on base: an appended list
// becomes "add /ch/-" operations, an unchanged value nothing. The fields
// of base that chans does not name stay when keep says so and are removed
// otherwise: a checkpoint has the channels of its channel_versions, as
// LangGraph's savers read them.
func lgPatch(base state.Doc, chans map[string]lgChannel, keep func(string) bool) (state.Patch, error) {
	var p state.Patch
	names := make([]string, 0, len(chans))
	for k := range chans {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		ops, err := lgChannelOps(base, name, chans[name])
		if err != nil {
			return nil, err
		}
		p = append(p, ops...)
	}
	for _, f := range base.Fields() {
		if _, ok := chans[f]; !ok && !keep(f) {
			p = append(p, state.Op{Op: state.OpRemove, Path: "/" + pointerEscaper.Replace(f)})
		}
	}
	return p, nil
}

func lgChannelOps(base state.Doc, name string, c lgChannel) (state.Patch, error) {
	path := "/" + pointerEscaper.Replace(name)
	switch {
	case c.Delete:
		if base.Has(name) {
			return state.Patch{{Op: state.OpRemove, Path: path}}, nil
		}
		return nil, nil
	case c.Append != nil:
		have, _ := base.ListLen(name)
		if _, isList := base.ListLen(name); (base.Has(name) && !isList) || have != *c.Base {
			return nil, unprocessable("$.channels."+name+".base", "the parent's list has %d elements, not %d", have, *c.Base)
		}
		if !base.Has(name) {
			all, _ := json.Marshal(c.Append)
			return state.Patch{{Op: state.OpAdd, Path: path, Value: all}}, nil
		}
		return appendOps(path, c.Append), nil
	}
	var v bytes.Buffer
	if err := json.Compact(&v, c.Value); err != nil {
		return nil, unprocessable("$.channels."+name+".value", "%v", err)
	}
	old, ok := base.Raw(name)
	if !ok {
		return state.Patch{{Op: state.OpAdd, Path: path, Value: v.Bytes()}}, nil
	}
	if bytes.Equal(old, v.Bytes()) {
		return nil, nil
	}
	if added, ok := appended(base, name, v.Bytes()); ok {
		return appendOps(path, added), nil
	}
	return state.Patch{{Op: state.OpReplace, Path: path, Value: v.Bytes()}}, nil
}

// appended returns the elements v adds to base's list field name, when v
// is that list with elements added at its end.
func appended(base state.Doc, name string, v []byte) ([]json.RawMessage, bool) {
	n, isList := base.ListLen(name)
	if !isList || len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil || len(elems) < n {
		return nil, false
	}
	for i := range n {
		old, _ := base.Element(name, i)
		if !bytes.Equal(old, elems[i]) {
			return nil, false
		}
	}
	return elems[n:], true
}

func appendOps(path string, elems []json.RawMessage) state.Patch {
	p := make(state.Patch, 0, len(elems))
	for _, e := range elems {
		p = append(p, state.Op{Op: state.OpAdd, Path: path + "/-", Value: e})
	}
	return p
}
