package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A pipeline of two Go steps: each gate's output is checked against the
// gate's threshold, committed, and written as the gate's file.
func Example() {
	dir, _ := os.MkdirTemp("", "pipeline")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "count.yaml")
	os.WriteFile(path, []byte(`name: count
metadata: {domain: shop, feature: stock}
state_dir: .state
gates:
  - {gate: 1, name: Count, step: count, threshold: 50}
  - {gate: 2, name: Double, step: double, threshold: 50}
`), 0o644)
	p, err := pipeline.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	steps := map[string]pipeline.GateStep{
		"count": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"n": 21}`), nil
		},
		"double": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			var v struct{ N int }
			if err := json.Unmarshal(in, &v); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]int{"n": 2 * v.N})
		},
	}
	_, err = pipeline.Run(context.Background(), p, pipeline.Config{Store: inmem.Open(store.Options{}), Thread: "t1", Steps: steps})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(p.GateFilePath("t1", 2))
	var g pipeline.GateFile
	json.Unmarshal(b, &g)
	var out struct{ N int }
	json.Unmarshal(g.Output, &out)
	fmt.Println(filepath.Base(p.GateFilePath("t1", 2)), g.Status, out.N)
	// Output: shop-stock-gate2-output.json SUCCESS 42
}
