package runs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzCheckCommand: a run's command (resume, goto, update) beside an input
// is accepted or refused with a 422 naming where, never a panic; an
// accepted goto is "__end__".
func FuzzCheckCommand(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"resume": true}`, `{}`}, {`{"goto": "__end__"}`, ``}, {`{"goto": ["__end__"]}`, `null`},
		{`{"goto": "write"}`, ``}, {`{"goto": {"node": "x"}}`, ``}, {`{"goto": "__end__", "resume": 1}`, ``},
		{`{"update": {}}`, ``}, {`{"resume": 1}`, `{"x": 1}`}, {`{"goto": [1]}`, ` { } `},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, cmd, input []byte) {
		var c Command
		if json.Unmarshal(cmd, &c) != nil {
			return
		}
		err := checkCommand(&c, input)
		if err == nil {
			if !IsNull(c.Goto) && !strings.Contains(string(c.Goto), "__end__") {
				t.Fatalf("goto %s accepted", c.Goto)
			}
			return
		}
		ae, ok := errors.AsType[*Error](err)
		if !ok || !errors.Is(err, ErrInvalidInput) || ae.Path == "" {
			t.Fatalf("%s beside %q: %v", cmd, input, err)
		}
	})
}
