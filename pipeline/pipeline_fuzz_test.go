package pipeline_test

import (
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/pipeline"
)

// FuzzParsePipeline: any bytes give a pipeline with gates or a typed spec
// error, never a panic.
func FuzzParsePipeline(f *testing.F) {
	f.Add([]byte("name: x\nmetadata: {domain: a.com, feature: f}\ngates:\n  - {gate: 1, name: A, step: s, threshold: 80}\n"))
	f.Add([]byte("name: x\nmetadata: {domain: a.com, feature: f}\nsecrets: {keys: [pin], patterns: ['[0-9]+'], defaults: false}\nstate_dir: out\ngates:\n  - {gate: 1, name: A, agent: a.md, contract: {type: object}}\n"))
	f.Add([]byte("name: x\ngates: []\n"))
	f.Add([]byte(""))
	f.Add([]byte("gates:\n  - gate: 1\n  - gate: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := pipeline.Parse("p.yaml", data)
		if err != nil {
			if !errors.Is(err, agentfile.ErrInvalidFile) && !errors.Is(err, pipeline.ErrEmpty) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if len(p.Gates) == 0 {
			t.Fatal("parsed a pipeline without gates")
		}
	})
}
