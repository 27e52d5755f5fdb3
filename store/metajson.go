package store

import (
	"maps"
	"slices"
	"strconv"

	"github.com/cairn-dev/cairn/internal/jsontext"
)

// appendMetaJSON appends a checkpoint's metadata record as encoding/json
// writes metaRecord, without reflection: a step's metadata is encoded on
// every commit. ok is false when m holds a field it leaves to
// encoding/json (tasks, an interrupt, a fork's origin, extra values, a
// float written with an exponent).
func appendMetaJSON(b []byte, nodes []string, m *Meta) (_ []byte, ok bool) {
	if len(m.Tasks) > 0 || len(m.Interrupt) > 0 || m.ForkedFrom != nil || len(m.Extra) > 0 {
		return b, false
	}
	w := objWriter{b: append(b, '{'), ok: true}
	w.strings(`"nodes":`, nodes)
	w.str(`"source":`, m.Source)
	w.str(`"error":`, m.Error)
	if m.Score != nil {
		w.key(`"score":`)
		w.float(*m.Score)
	}
	if m.Tokens != nil {
		w.key(`"tokens":`)
		w.b = appendTokensJSON(w.b, *m.Tokens)
	}
	w.durations(`"duration_ms":`, m.DurationMS)
	w.strings(`"next":`, m.Next)
	w.int(`"step_of":`, m.StepOf)
	w.str(`"stop_reason":`, m.StopReason)
	w.str(`"run_id":`, m.RunID)
	if u := m.Usage; u != nil {
		w.key(`"usage":`)
		in := objWriter{b: append(w.b, '{'), ok: true}
		in.int(`"steps":`, u.Steps)
		if u.Tokens != (Tokens{}) {
			in.key(`"tokens":`)
			in.b = appendTokensJSON(in.b, u.Tokens)
		}
		in.int(`"runtime_ms":`, u.RuntimeMS)
		in.int(`"inbox":`, u.Inbox)
		w.b = append(in.b, '}')
	}
	return append(w.b, '}'), w.ok
}

func appendTokensJSON(b []byte, t Tokens) []byte {
	w := objWriter{b: append(b, '{'), ok: true}
	w.int(`"input":`, t.Input)
	w.int(`"output":`, t.Output)
	return append(w.b, '}')
}

// objWriter appends the members of a JSON object, leaving out the empty
// ones as omitempty does.
type objWriter struct {
	b  []byte
	n  int // members written
	ok bool
}

// sep starts the next member or element: a comma after the first.
func (w *objWriter) sep() {
	if w.n > 0 {
		w.b = append(w.b, ',')
	}
	w.n++
}

func (w *objWriter) key(k string) {
	w.sep()
	w.b = append(w.b, k...)
}

func (w *objWriter) str(k, v string) {
	if v != "" {
		w.key(k)
		w.b = jsontext.AppendString(w.b, v)
	}
}

func (w *objWriter) int(k string, v int64) {
	if v != 0 {
		w.key(k)
		w.b = strconv.AppendInt(w.b, v, 10)
	}
}

// float appends f, or marks the object as one to leave to encoding/json.
func (w *objWriter) float(f float64) {
	var ok bool
	if w.b, ok = jsontext.AppendFloat(w.b, f); !ok {
		w.ok = false
	}
}

func (w *objWriter) strings(k string, v []string) {
	if len(v) == 0 {
		return
	}
	w.key(k)
	list := objWriter{b: append(w.b, '['), ok: w.ok}
	for _, s := range v {
		list.sep()
		list.b = jsontext.AppendString(list.b, s)
	}
	w.b, w.ok = append(list.b, ']'), list.ok
}

// durations appends a map as encoding/json does: keys in order.
func (w *objWriter) durations(k string, v map[string]float64) {
	if len(v) == 0 {
		return
	}
	w.key(k)
	obj := objWriter{b: append(w.b, '{'), ok: w.ok}
	for _, name := range slices.Sorted(maps.Keys(v)) {
		obj.sep()
		obj.b = append(jsontext.AppendString(obj.b, name), ':')
		obj.float(v[name])
	}
	w.b, w.ok = append(obj.b, '}'), obj.ok
}
