package scripted_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/scripted"
)

// A script answers the steps that name it, in order, offline: tests and
// examples run agents without a provider.
func Example() {
	m, err := scripted.Parse("replies.yaml", []byte(`replies:
  - step: greet
    text: "Hello, Ada."
  - step: extract
    json: {name: Ada, born: 1815}
`))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, step := range []string{"greet", "extract", "greet"} {
		resp, err := m.Generate(ctx, agent.Request{Step: step, Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
		if err != nil {
			fmt.Println(errors.Is(err, agent.ErrScriptDone))
			continue
		}
		fmt.Println(resp.Message.Content)
	}
	// Output:
	// Hello, Ada.
	// {"born":1815,"name":"Ada"}
	// true
}
