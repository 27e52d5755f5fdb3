package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// TestRunDataRecord: a run's record leaves its defaults out and reads
// back as it was.
func TestRunDataRecord(t *testing.T) {
	tests := []struct {
		name    string
		d       runData
		absent  []string
		present []string
	}{
		{"defaults", runData{AssistantID: "chat", MultitaskStrategy: "reject", StopReason: "success", Attempt: 1,
			Kwargs: runKwargs{Input: json.RawMessage(`{"messages":[]}`), StreamMode: []string{"values"}, OnDisconnect: "continue"}},
			[]string{"multitask_strategy", "stream_mode", "on_disconnect", "stream_subgraphs", "metadata", "stop_reason"}, []string{`"input":{"messages":[]}`}},
		{"asked for", runData{AssistantID: "chat", MultitaskStrategy: "enqueue", Metadata: map[string]any{"a": "b"}, StopReason: "interrupt", Attempt: 2,
			Kwargs: runKwargs{Input: json.RawMessage(`null`), StreamMode: []string{"updates", "values"}, StreamSubgraphs: true, OnDisconnect: "cancel"}},
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
			var got runData
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

// TestStatusOf: errors map to statuses by their type.
func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", store.ErrNotFound), 404},
		{fmt.Errorf("x: %w", store.ErrConflict), 409},
		{fmt.Errorf("x: %w", store.ErrInvalidArgument), 422},
		{fmt.Errorf("x: %w", store.ErrUnavailable), 503},
		{store.ErrClosed, 503},
		{context.DeadlineExceeded, 504},
		{errors.New("anything else"), 500},
	}
	for _, tc := range tests {
		if got := statusOf(tc.err); got != tc.want {
			t.Errorf("statusOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
