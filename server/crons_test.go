package server_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestCronsHTTP: crons made, found, changed and deleted over HTTP, in
// LangGraph's shapes; bad requests are 4xx naming the field, and store
// nothing.
func TestCronsHTTP(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	good := func(extra map[string]any) map[string]any {
		m := map[string]any{"assistant_id": "drafts", "schedule": "0 9 * * *", "input": map[string]any{}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name, path string
		body       any
		code       int
		where      string
	}{
		{"unknown field", "/runs/crons", good(map[string]any{"every": "day"}), 422, "$.every"},
		{"schedule not a string", "/runs/crons", good(map[string]any{"schedule": 5}), 422, "$.schedule"},
		{"bad schedule", "/runs/crons", good(map[string]any{"schedule": "9am daily"}), 422, "$.schedule"},
		{"unknown zone", "/runs/crons", good(map[string]any{"timezone": "Europe/Atlantis"}), 422, "$.timezone"},
		{"bad end", "/threads/t1/runs/crons", good(map[string]any{"end_time": "soon"}), 422, "$.end_time"},
		{"bad on_run_completed", "/runs/crons", good(map[string]any{"on_run_completed": "archive"}), 422, "$.on_run_completed"},
		{"nested unknown field", "/runs/crons", good(map[string]any{"config": map[string]any{"recursion": 3}}), 422, "$.config.recursion"},
		{"bad stream mode", "/runs/crons", good(map[string]any{"stream_mode": []string{"everything"}}), 422, "$.stream_mode[0]"},
		{"unknown assistant", "/runs/crons", good(map[string]any{"assistant_id": "nope"}), 404, ""},
		{"unknown thread", "/threads/nope/runs/crons", good(nil), 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do("POST", tc.path, tc.body)
			var e struct{ Detail, Path string }
			_ = json.Unmarshal(b, &e)
			if code != tc.code || e.Path != tc.where || e.Detail == "" {
				t.Fatalf("%d %s, want %d at %q", code, b, tc.code, tc.where)
			}
		})
	}
	if code, b := ts.do("POST", "/runs/crons/count", map[string]any{}); code != 200 || string(b) != jsonText(0) {
		t.Fatalf("crons after bad requests: %d %s", code, b)
	}
	c := ts.json("POST", "/threads/t1/runs/crons", good(map[string]any{"metadata": map[string]any{"team": "a"}, "timezone": "Europe/Paris"}), 200)
	id, _ := c["cron_id"].(string)
	if c["thread_id"] != "t1" || c["schedule"] != "0 9 * * *" || c["enabled"] != true || c["next_run_date"] == nil || c["payload"].(map[string]any)["assistant_id"] != "drafts" {
		t.Fatalf("made %v", c)
	}
	s := ts.json("POST", "/runs/crons", good(map[string]any{"on_run_completed": "keep"}), 200)
	if s["thread_id"] != nil || s["on_run_completed"] != "keep" {
		t.Fatalf("stateless %v", s)
	}
	for _, tc := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{}, 2}, {map[string]any{"thread_id": "t1"}, 1}, {map[string]any{"metadata": map[string]any{"team": "a"}}, 1},
		{map[string]any{"metadata": map[string]any{"team": "b"}}, 0}, {map[string]any{"assistant_id": "drafts"}, 2},
	} {
		if code, b := ts.do("POST", "/runs/crons/count", tc.body); code != 200 || string(b) != jsonText(tc.want) {
			t.Fatalf("count %v: %d %s, want %d", tc.body, code, b, tc.want)
		}
	}
	list := ts.json("POST", "/runs/crons/search", map[string]any{"sort_by": "created_at", "sort_order": "asc", "select": []string{"cron_id"}, "limit": 1}, 200)["list"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["cron_id"] != id || len(list[0].(map[string]any)) != 1 {
		t.Fatalf("search %v", list)
	}
	code, b := ts.do("PATCH", "/runs/crons/"+id, map[string]any{"timezone": "Nowhere"})
	if code != 422 {
		t.Fatalf("patch to an unknown zone: %d %s", code, b)
	}
	p := ts.json("PATCH", "/runs/crons/"+id, map[string]any{"enabled": false, "schedule": "*/10 * * * *", "metadata": map[string]any{"more": 1}}, 200)
	if p["enabled"] != false || p["schedule"] != "*/10 * * * *" || p["next_run_date"] != nil || p["metadata"].(map[string]any)["team"] != "a" {
		t.Fatalf("patched %v", p)
	}
	ts.json("DELETE", "/runs/crons/"+id, nil, 204)
	ts.json("GET", "/runs/crons/"+id, nil, 404)
	ts.json("DELETE", "/runs/crons/"+id, nil, 404)
}

func jsonText(n int) string {
	b, _ := json.Marshal(n)
	return string(b) + "\n"
}
