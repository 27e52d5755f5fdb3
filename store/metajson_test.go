package store

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzMetaJSON checks the metadata encoded without reflection against
// encoding/json byte for byte, and that what it leaves to encoding/json
// is refused rather than written differently.
func FuzzMetaJSON(f *testing.F) {
	f.Add("step", "", "<run&id>", int64(3), int64(0), 12.5, uint8(0xff))
	f.Add("__start__", "input", "", int64(0), int64(-4), 1e-9, uint8(0))
	f.Add("n\u2028\xff", "boom\n", "r", int64(1)<<40, int64(7), 0.0, uint8(0x55))
	f.Fuzz(func(t *testing.T, node, text, run string, n, k int64, x float64, set uint8) {
		m := Meta{Source: text, Error: text, Next: []string{node, run}, StepOf: n, StopReason: text, RunID: run}
		if set&1 != 0 {
			m.Score = &x
		}
		if set&2 != 0 {
			m.Tokens = &Tokens{Input: n, Output: k}
		}
		if set&4 != 0 {
			m.DurationMS = map[string]float64{node: x, run: float64(k), text: 1}
		}
		if set&8 != 0 {
			m.Usage = &Usage{Steps: n, Tokens: Tokens{Output: k}, RuntimeMS: k, Inbox: k}
		}
		if set&16 != 0 {
			m.Extra = map[string]any{"a": 1}
		}
		if set&32 != 0 {
			m.Next = nil
		}
		nodes := []string{node}
		if set&64 != 0 {
			nodes = []string{}
		}
		got, ok := appendMetaJSON(nil, nodes, &m)
		want, err := json.Marshal(metaRecord{Nodes: nodes, Meta: m})
		if err != nil {
			if ok {
				t.Fatalf("encoded %s where encoding/json fails: %v", got, err)
			}
			return
		}
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("got %s\nencoding/json %s", got, want)
		}
		// Without extra values or floats nothing is left to encoding/json.
		if !ok && set&(16|4|1) == 0 {
			t.Fatalf("left %s to encoding/json", want)
		}
	})
}
