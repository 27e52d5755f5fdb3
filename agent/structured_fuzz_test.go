package agent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
)

// FuzzFirstJSONObject: the extractor returns a balanced object that starts
// at the text's first '{' and lies inside the text, or one of its two
// errors; any valid JSON object embedded after prose is found whole.
func FuzzFirstJSONObject(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`,
		`Here it is: {"a":"}{","b":{"c":[1,2]}} and more`,
		`no object`,
		`{"open": [1, 2`,
		`{"esc":"\"}"}`,
		`text {"a":1} {"b":2}`,
	} {
		f.Add(s, `{"k":"v"}`)
	}
	f.Fuzz(func(t *testing.T, text, obj string) {
		got, err := agent.FirstJSONObject(text)
		switch {
		case errors.Is(err, agent.ErrNoJSON):
			if strings.Contains(text, "{") {
				t.Fatalf("ErrNoJSON for text with a brace: %q", text)
			}
		case errors.Is(err, agent.ErrUnbalancedJSON):
		case err != nil:
			t.Fatalf("untyped error %v", err)
		default:
			if !strings.HasPrefix(got, "{") || !strings.HasSuffix(got, "}") || !strings.HasPrefix(text[strings.IndexByte(text, '{'):], got) {
				t.Fatalf("FirstJSONObject(%q) = %q", text, got)
			}
		}
		// A compact JSON object after brace-free prose is extracted as it is.
		var v map[string]any
		if json.Unmarshal([]byte(obj), &v) != nil || strings.ContainsAny(text, "{}\"") {
			return
		}
		compact, _ := json.Marshal(v)
		if got, err := agent.FirstJSONObject(text + string(compact) + text); err != nil || got != string(compact) {
			t.Fatalf("embedded %s: got %q, %v", compact, got, err)
		}
	})
}
