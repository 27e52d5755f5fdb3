package spec_test

import (
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/spec"
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
		p, err := spec.ParsePipeline("p.yaml", data)
		if err != nil {
			if !errors.Is(err, spec.ErrSpec) && !errors.Is(err, spec.ErrEmptyPipeline) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if len(p.Gates) == 0 {
			t.Fatal("parsed a pipeline without gates")
		}
	})
}
