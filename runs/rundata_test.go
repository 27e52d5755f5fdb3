package runs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestRunDataRecord: a run's record leaves its defaults out and reads
// back as it was.
func TestRunDataRecord(t *testing.T) {
	tests := []struct {
		name    string
		d       Data
		absent  []string
		present []string
	}{
		{"defaults", Data{AssistantID: "chat", MultitaskStrategy: "reject", StopReason: "success", Attempt: 1,
			Kwargs: Kwargs{Input: json.RawMessage(`{"messages":[]}`), StreamMode: []string{"values"}, OnDisconnect: "continue"}},
			[]string{"multitask_strategy", "stream_mode", "on_disconnect", "stream_subgraphs", "metadata", "stop_reason"}, []string{`"input":{"messages":[]}`}},
		{"asked for", Data{AssistantID: "chat", MultitaskStrategy: "enqueue", Metadata: map[string]any{"a": "b"}, StopReason: "interrupt", Attempt: 2,
			Kwargs: Kwargs{Input: json.RawMessage(`null`), StreamMode: []string{"updates", "values"}, StreamSubgraphs: true, OnDisconnect: "cancel"}},
			nil, []string{`"multitask_strategy":"enqueue"`, `"stream_mode":["updates","values"]`, `"stream_subgraphs":true`, `"on_disconnect":"cancel"`, `"stop_reason":"interrupt"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.absent {
				if strings.Contains(string(b), `"`+k+`"`) {
					t.Errorf("%s written: %s", k, b)
				}
			}
			for _, k := range tc.present {
				if !strings.Contains(string(b), k) {
					t.Errorf("%s missing: %s", k, b)
				}
			}
			var got Data
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			want := tc.d
			if want.StopReason == "success" {
				want.StopReason = ""
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read back %+v, want %+v", got, want)
			}
		})
	}
}
