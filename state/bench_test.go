package state

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkAppendMessage shows that appending one message costs the same on
// an empty state as on a state of 10,000 messages.
func BenchmarkAppendMessage(b *testing.B) {
	schema := MustSchema(WithField("messages", ReducerMessages), WithField("count", ""))
	content := strings.Repeat("x", 200)
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("existing=%d", n), func(b *testing.B) {
			d := EmptyDoc()
			msgs := make([]Message, n)
			for i := range msgs {
				msgs[i] = Message{ID: fmt.Sprintf("m%d", i), Role: "assistant", Content: content}
			}
			d, _, err := schema.Apply(d, Update{"messages": msgs})
			if err != nil {
				b.Fatal(err)
			}
			// Warm the id index, as a running thread has it.
			if d, _, err = schema.Apply(d, Update{"messages": Message{ID: "warm", Content: content}}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				nd, p, err := schema.Apply(d, Update{"messages": Message{ID: fmt.Sprintf("new%d", i), Role: "assistant", Content: content}, "count": i})
				if err != nil || len(p) != 2 {
					b.Fatal(err)
				}
				d = nd
			}
		})
	}
}

// BenchmarkReplay measures replaying one W1-shaped patch onto a document.
func BenchmarkReplay(b *testing.B) {
	schema := MustSchema(WithField("messages", ReducerMessages))
	content := strings.Repeat("x", 200)
	d, _, err := schema.Apply(EmptyDoc(), Update{"messages": []Message{}, "last": "", "count": 0})
	if err != nil {
		b.Fatal(err)
	}
	_, p, err := schema.Apply(d, Update{"messages": Message{ID: "a", Role: "assistant", Content: content}, "last": content, "count": 1})
	if err != nil {
		b.Fatal(err)
	}
	enc := EncodePatch(nil, p)
	b.ReportAllocs()
	for b.Loop() {
		dp, err := DecodePatch(enc, false)
		if err != nil {
			b.Fatal(err)
		}
		if d, err = d.Apply(dp); err != nil {
			b.Fatal(err)
		}
	}
}
