package openai_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// BenchmarkFirstToken measures the time to the first token of a streamed
// reply from a local server in the OpenAI wire format: with the SDK
// alone, and through Cairn (a flow run streamed in messages mode whose
// node calls the model). Reported as µs/first-token; the difference is
// Cairn's streaming overhead.
func BenchmarkFirstToken(b *testing.B) {
	srv := server(b, func(w http.ResponseWriter, body map[string]any) {
		sse(w, chunk(`{"role":"assistant","content":"first "}`), chunk(`{"content":"second"}`),
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	})
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}}
	b.Run("sdk", func(b *testing.B) {
		client := sdk.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
		var total time.Duration
		for b.Loop() {
			start := time.Now()
			stream := client.Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{Model: "gpt-test",
				Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}})
			first := true
			for stream.Next() {
				if c := stream.Current(); first && len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
					total += time.Since(start)
					first = false
				}
			}
			if err := stream.Err(); err != nil {
				b.Fatal(err)
			}
			stream.Close()
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/first-token")
	})
	b.Run("cairn", func(b *testing.B) {
		m := model(b, srv.URL, key)
		g, err := flow.NewGraph(state.MustSchema()).AddNode("chat", func(ctx context.Context, d state.Doc) (state.Update, error) {
			resp, err := agent.Generate(ctx, m, req)
			return state.Update{"reply": resp.Message.Content}, err
		}).Chain("chat").Compile()
		if err != nil {
			b.Fatal(err)
		}
		r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
		var total time.Duration
		i := 0
		for b.Loop() {
			i++
			start := time.Now()
			first := true
			for ev, err := range r.Stream(context.Background(), "t"+strconv.Itoa(i), nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamMessages}}) {
				if err != nil {
					b.Fatal(err)
				}
				if first && ev.Kind == flow.EventMessage {
					total += time.Since(start)
					first = false
				}
			}
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/first-token")
	})
}
