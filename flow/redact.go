package flow

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Redaction: with Options.Redact set, everything a run commits or emits
// passes through the redactor first. Node updates are redacted before they
// are applied, so the state in memory is the state committed and a resumed
// run replays the same bytes. With Redact nil none of this runs.

// apply merges upd into doc, redacting it first when the runner redacts.
func (r *Runner) apply(doc state.Doc, upd state.Update, opts state.ApplyOptions) (state.Doc, state.Patch, error) {
	if r.opts.Redact == nil {
		return r.g.schema.Apply(doc, upd, opts)
	}
	raw, _, ok := r.redactUpdate(upd)
	if !ok {
		return r.g.schema.Apply(doc, upd, opts) // reports the encoding error
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return state.Doc{}, nil, err
	}
	return r.g.schema.ApplyJSON(doc, m, opts)
}

// redactUpdate encodes upd and redacts it; changed reports whether the
// redactor hid anything (a node produced a secret), ok is false when upd
// does not encode (Apply then names the value that failed).
func (r *Runner) redactUpdate(upd state.Update) (raw json.RawMessage, changed, ok bool) {
	b, err := json.Marshal(upd)
	if err != nil {
		return nil, false, false
	}
	raw = r.opts.Redact.JSON(b)
	return raw, !bytes.Equal(b, raw), true
}

// redactPatch redacts the values of a patch: secret shapes everywhere, the
// whole value when the path's last member is a secret key.
func (r *Runner) redactPatch(p state.Patch) state.Patch {
	if r.opts.Redact == nil || len(p) == 0 {
		return p
	}
	out := make(state.Patch, len(p))
	for i, op := range p {
		last := op.Path[strings.LastIndexByte(op.Path, '/')+1:]
		if len(op.Value) > 0 && r.opts.Redact.IsSecretKey(last) && string(op.Value) != "null" && string(op.Value) != `""` {
			op.Value = json.RawMessage(`"[REDACTED]"`)
		} else if len(op.Value) > 0 {
			op.Value = r.opts.Redact.JSON(op.Value)
		}
		out[i] = op
	}
	return out
}

// redactMeta redacts what a checkpoint's metadata can carry from nodes:
// errors, interrupt payloads and extra data (Send inputs are redacted
// when scheduled).
func (r *Runner) redactMeta(m *store.Meta) {
	rd := r.opts.Redact
	if rd == nil {
		return
	}
	m.Error = rd.String(m.Error)
	if len(m.Interrupt) > 0 {
		m.Interrupt = rd.JSON(m.Interrupt)
	}
	if m.Extra != nil {
		if v, ok := rd.Value(m.Extra).(map[string]any); ok {
			m.Extra = v
		}
	}
}

// redactEvent redacts an event's payload and error.
func (r *Runner) redactEvent(ev *Event) {
	if len(ev.Payload) > 0 {
		ev.Payload = r.opts.Redact.JSON(ev.Payload)
	}
	ev.Err = r.opts.Redact.String(ev.Err)
}

// schedule turns targets into tasks (see dedupe), redacting Send inputs.
func (r *Runner) schedule(ts []Target) []store.Task {
	tasks := dedupe(ts)
	if r.opts.Redact != nil {
		for i := range tasks {
			if len(tasks[i].Input) > 0 {
				tasks[i].Input = r.opts.Redact.JSON(tasks[i].Input)
			}
		}
	}
	return tasks
}
