package server

import (
	"errors"
	"testing"
)

// FuzzV2Command feeds the protocol's envelope and event-stream filter
// readers arbitrary bytes: each either reads a command (an id of 0 or
// more, a method, params an object) and a filter (known channels) or
// answers a 4xx that names where the input is wrong; neither panics.
func FuzzV2Command(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"method":"run.start","params":{"assistant_id":"a","input":{}}}`,
		`{"id":0,"method":"state.get"}`, `{"id":-1}`, `{"id":1.5,"method":"x"}`, `[]`, `"x"`, `{"id":1,"method":"x","params":"y"}`,
		`{"channels":["values","custom:tokens"],"namespaces":[["a:1"]],"depth":1,"since":4}`, `{"channels":[]}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := checkV2Command(data)
		checkFuzzError(t, "command", data, err)
		if err == nil && (c.ID == nil || *c.ID < 0 || c.Method == "") {
			t.Fatalf("command %q read as %+v", data, c)
		}
		fl, err := checkV2Filter(data, true)
		checkFuzzError(t, "filter", data, err)
		if err == nil {
			for _, ch := range fl.Channels {
				if !isV2Channel(ch) {
					t.Fatalf("filter %q let channel %q through", data, ch)
				}
			}
		}
	})
}

func checkFuzzError(t *testing.T, what string, data []byte, err error) {
	if err == nil {
		return
	}
	ae, ok := errors.AsType[*apiError](err)
	if !ok || ae.Status/100 != 4 || ae.Path == "" {
		t.Fatalf("%s %q: %v, want a 4xx naming a path", what, data, err)
	}
}
