package runs

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzSteerMessage: a steer's message is accepted as a message object
// with a type and a content, or refused with a 422 naming where, never a
// panic.
func FuzzSteerMessage(f *testing.F) {
	for _, seed := range []string{`"also check the date"`, `""`, `5`, `null`, ``, `{"type":"human","content":"x"}`,
		`{"role":"user","content":"x"}`, `{"role":"robot","content":"x"}`, `{"content":"x"}`, `{"type":"human"}`, `[1]`, `{`, `{"role":"user","content":[{"type":"text","text":"x"}]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		msg, err := steerMessage(raw)
		if err != nil {
			ae, ok := errors.AsType[*Error](err)
			if !ok || !errors.Is(err, ErrInvalidInput) || ae.Path == "" {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		var m map[string]any
		if json.Unmarshal(msg, &m) != nil || m["type"] == nil || m["content"] == nil {
			t.Fatalf("%q accepted as %s", raw, msg)
		}
	})
}
