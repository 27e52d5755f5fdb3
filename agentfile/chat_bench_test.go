package agentfile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkChatTurn measures one turn of examples/serve/chat.md (its
// scripted model answering, no tool call) on a thread that already holds
// depth turns, on SQLite, with the conversations kept decoded between
// runs as cairn serve keeps them: a turn should cost the same at any
// depth.
func BenchmarkChatTurn(b *testing.B) {
	for _, depth := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint("depth=", depth), func(b *testing.B) {
			ctx := context.Background()
			a, err := agentfile.Load(filepath.Join("..", "examples", "serve", "chat.md"))
			if err != nil {
				b.Fatal(err)
			}
			s, err := sqlite.OpenStore(context.Background(), filepath.Join(b.TempDir(), "chat.db"), sqlite.Options{}, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cfg := agentfile.RunConfig{Store: s, Thread: "chat", Conversations: agentfile.NewConversationCache(64 << 20)}
			turn := func(i int) {
				cfg.Input = agentfile.TextInput("api", fmt.Sprintf("turn %d: hello, how are you today?", i))
				if _, err := agentfile.Run(ctx, a, cfg); err != nil {
					b.Fatal(err)
				}
			}
			for i := range depth {
				turn(i)
			}
			b.ResetTimer()
			for i := range b.N {
				turn(depth + i)
			}
		})
	}
}
