package server

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/runs"
)

// FuzzDecodeRunRequest feeds any bytes to the run request decoder: it
// never panics, whatever it refuses is a 422 that says where, and what it
// accepts is UTF-8 (invalid bytes are refused at their path, never read
// as U+FFFD).
func FuzzDecodeRunRequest(f *testing.F) {
	for _, seed := range []string{
		`{"assistant_id": "a", "input": "x", "stream_mode": ["values", "updates"]}`,
		`{"assistant_id": "a", "command": {"resume": {"ok": true}}, "config": {"recursion_limit": 3, "configurable": {"checkpoint_id": "1"}}}`,
		`{"stream_mode": "values", "interrupt_before": "*"}`,
		`{"config": {"recursion": 1}}`, `{"stream_mode": 3}`, `[1, 2]`, `{"a": `, ``, `null`, `{"checkpoint": {"checkpoint_id": 5}}`,
		"{\"input\": {\"a\": [\"x\", \"\xff\"]}}", "{\"metadata\": {\"k\xc3\": 1}}", "{\"assistant_id\": \"\xed\xa0\x80\"}", "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var q runs.Request
		err := decodeJSON(data, &q)
		if err == nil {
			if !utf8.Valid(data) {
				t.Fatalf("%q is not UTF-8 and was accepted", data)
			}
			return
		}
		ae, ok := errors.AsType[*apiError](err)
		if !ok || ae.Status != 422 || !strings.HasPrefix(ae.Path, "$") || ae.Msg == "" {
			t.Fatalf("%q: %v (%T)", data, err, err)
		}
	})
}

// FuzzCheckQuery: a query string checkQuery lets through parses whole
// (url.ParseQuery drops nothing) into UTF-8 names and values without a
// control character; one it refuses is a 422 naming a parameter.
func FuzzCheckQuery(f *testing.F) {
	for _, seed := range []string{"subgraphs=true", "checkpoint_ns=%ff", "assistant_id=%00", "a=1;b=2", "status=%zz", "%ff=1", "metadata=%7B%22a%22%3A1%7D&limit=5", "x=%0A", "=", "&&", "k=caf%C3%A9"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := checkQuery(raw)
		if err != nil {
			ae, ok := errors.AsType[*apiError](err)
			if !ok || ae.Status != 422 || ae.Path == "" || ae.Msg == "" {
				t.Fatalf("%q: %v (%T)", raw, err, err)
			}
			return
		}
		q, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatalf("%q passed, but url.ParseQuery says %v", raw, err)
		}
		for k, vs := range q {
			for _, s := range append([]string{k}, vs...) {
				if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
					t.Fatalf("%q passed with %q in it", raw, s)
				}
			}
		}
	})
}

// FuzzIDs: checkpoint and event ids read back what they wrote, and
// anything else is refused without a panic.
func FuzzIDs(f *testing.F) {
	f.Add("00000000-0000-8000-8000-000000000005", int64(5))
	f.Add("00000000-0000-8000-8001-000000000005", int64(5))
	f.Add("7", int64(1))
	f.Add("run:3", int64(0))
	f.Add("r:3:2", int64(9))
	f.Fuzz(func(t *testing.T, s string, seq int64) {
		if seq > 0 && seq < 1<<48 {
			if got, err := runs.ParseCheckpointID(runs.CheckpointID(seq)); err != nil || got != (runs.CheckpointAt{Seq: seq}) {
				t.Fatalf("checkpoint id of %d reads back %+v, %v", seq, got, err)
			}
			if got, err := runs.ParseCheckpointID(runs.InputCheckpointID(seq)); err != nil || got != (runs.CheckpointAt{Seq: seq, Input: true}) {
				t.Fatalf("input checkpoint id of %d reads back %+v, %v", seq, got, err)
			}
			attempt := int(seq%5) + 1
			if got, a, err := runs.ParseEventID("r", runs.EventID("r", seq, attempt)); err != nil || got != seq || a != attempt {
				t.Fatalf("event id of %d (attempt %d) reads back %d (attempt %d), %v", seq, attempt, got, a, err)
			}
		}
		if n, err := runs.ParseCheckpointID(s); err == nil && n.Seq <= 0 {
			t.Fatalf("%q read as seq %d", s, n.Seq)
		}
		if n, a, err := runs.ParseEventID("r", s); err == nil && (n < 0 || a < 1) {
			t.Fatalf("%q read as event %d of attempt %d", s, n, a)
		}
	})
}
