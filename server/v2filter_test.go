package server

import (
	"testing"

	"github.com/cairn-dev/cairn/runs"
)

// TestV2FilterMatches: an event stream's filter keeps events by channel
// (custom:<name> for one custom channel), by namespace prefix, and by
// depth below the prefix.
func TestV2FilterMatches(t *testing.T) {
	ev := func(method string, ns []string, data any) *runs.V2Event {
		return &runs.V2Event{Method: method, Params: runs.V2Params{Namespace: ns, Data: data}}
	}
	depth := func(n int) *int { return &n }
	for _, tc := range []struct {
		name string
		f    v2Filter
		ev   *runs.V2Event
		want bool
	}{
		{"its channel", v2Filter{Channels: []string{"values"}}, ev("values", []string{}, nil), true},
		{"another channel", v2Filter{Channels: []string{"values"}}, ev("messages", []string{}, nil), false},
		{"input is input.requested", v2Filter{Channels: []string{"input"}}, ev("input.requested", []string{}, nil), true},
		{"custom takes every custom event", v2Filter{Channels: []string{"custom"}}, ev("custom", []string{}, map[string]any{"name": "a"}), true},
		{"custom:a takes a's", v2Filter{Channels: []string{"custom:a"}}, ev("custom", []string{}, map[string]any{"name": "a"}), true},
		{"custom:a leaves b's", v2Filter{Channels: []string{"custom:a"}}, ev("custom", []string{}, map[string]any{"name": "b"}), false},
		{"under a namespace", v2Filter{Channels: []string{"values"}, Namespaces: [][]string{{"sub:1"}}}, ev("values", []string{"sub:1", "inner:2"}, nil), true},
		{"outside it", v2Filter{Channels: []string{"values"}, Namespaces: [][]string{{"sub:1"}}}, ev("values", []string{"sub:2"}, nil), false},
		{"the root prefix, depth 0: the root only", v2Filter{Channels: []string{"values"}, Namespaces: [][]string{{}}, Depth: depth(0)}, ev("values", []string{"sub:1"}, nil), false},
		{"the root prefix, depth 1", v2Filter{Channels: []string{"values"}, Namespaces: [][]string{{}}, Depth: depth(1)}, ev("values", []string{"sub:1"}, nil), true},
		{"too deep", v2Filter{Channels: []string{"values"}, Namespaces: [][]string{{}}, Depth: depth(1)}, ev("values", []string{"sub:1", "inner:2"}, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.matches(tc.ev); got != tc.want {
				t.Fatalf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}
