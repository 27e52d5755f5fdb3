package redact_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/redact"
)

// benchReply is a model's reply of about 2 KB in word-sized tokens, one
// secret in it.
var benchReply = func() []string {
	words := strings.Fields(strings.Repeat("The quick brown fox jumps over the lazy dog, then reads the config: host=db port=5432 and ", 20) + "key sk-abcdefghijklmnopqrstuvwx done.")
	for i := range words {
		words[i] = " " + words[i]
	}
	return words
}()

// BenchmarkStream streams benchReply token by token through the
// redactor of an agent file (defaults and an API key value), reused
// (its expressions compiled for streams once); String is the whole reply
// at once, for comparison; redactor is making the run's redactor as
// agent files do for each run, and redactor+stream that and its first
// stream (which compiles the stream's expressions).
func BenchmarkStream(b *testing.B) {
	n := 0
	for _, w := range benchReply {
		n += len(w)
	}
	text := strings.Join(benchReply, "")
	r := redact.Default().WithSecrets("plainkeyvalue-0042")
	b.Run("reused", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			s := r.Stream()
			for _, w := range benchReply {
				s.Write(w)
			}
			s.Flush()
		}
	})
	b.Run("String", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			r.String(text)
		}
	})
	b.Run("redactor", func(b *testing.B) {
		for b.Loop() {
			redact.Default().WithSecrets("plainkeyvalue-0042")
		}
	})
	b.Run("redactor+stream", func(b *testing.B) {
		for b.Loop() {
			redact.Default().WithSecrets("plainkeyvalue-0042").Stream()
		}
	})
}
