package agentfile_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// orderFile is a chain whose step names are not in alphabetical order.
const orderFile = `---
name: order
chain:
  - {id: plan, kind: text}
  - {id: lang, kind: text}
  - {id: facts, kind: text}
  - {id: priority, kind: text}
---
## step:plan
Plan.
## step:lang
Language.
## step:facts
Facts.
## step:priority
Priority.
`

// TestPromptStepsInChainOrder: the chain state every prompt shows lists
// the steps in chain order (Quick Agent's dict, as json.dumps(state,
// indent=2) writes it), not sorted by name.
func TestPromptStepsInChainOrder(t *testing.T) {
	a, err := agentfile.Parse("order.md", []byte(orderFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := scripted.Parse("r.yaml", []byte("replies:\n  - text: P\n  - text: L\n  - text: F\n  - text: X\n"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingModel{m: m}
	cfg := agentfile.RunConfig{Store: inmem.Open(store.Options{}), Thread: "o", Model: rec, Input: agentfile.TextInput("inline", "go")}
	if _, err := agentfile.Run(context.Background(), a, cfg); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"{\n  \"agent_id\": \"order\",\n  \"steps\": {},\n  \"final_output\": null\n}",
		"{\n  \"agent_id\": \"order\",\n  \"steps\": {\n    \"plan\": \"P\"\n  },\n  \"final_output\": null\n}",
		"{\n  \"agent_id\": \"order\",\n  \"steps\": {\n    \"plan\": \"P\",\n    \"lang\": \"L\"\n  },\n  \"final_output\": null\n}",
		"{\n  \"agent_id\": \"order\",\n  \"steps\": {\n    \"plan\": \"P\",\n    \"lang\": \"L\",\n    \"facts\": \"F\"\n  },\n  \"final_output\": null\n}",
	}
	if len(rec.reqs) != len(want) {
		t.Fatalf("%d model calls, want %d", len(rec.reqs), len(want))
	}
	for i, msgs := range rec.reqs {
		prompt := msgs[len(msgs)-1].Content
		if !strings.Contains(prompt, "## State\n"+want[i]+"\n\n## Task\n") {
			t.Errorf("prompt %d shows the state as\n%s\nwant\n%s", i+1, prompt, want[i])
		}
	}
}
