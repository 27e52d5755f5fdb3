package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkServeChatTurn measures one W3 turn (POST runs/wait) of the
// chat agent file examples/serve/chat.md through cairn serve, in
// process, on a thread that already holds depth turns. Its B/op and
// allocs/op are the figures to read (the machine's noise does not move
// them): what a turn allocates, server and client together, should not
// grow with the thread, beyond the answer (the thread's whole state,
// which the client reads into a fixed buffer and the server writes
// piece by piece).
func BenchmarkServeChatTurn(b *testing.B) {
	for _, depth := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint("depth=", depth), func(b *testing.B) {
			url := serveInProcess(b, filepath.Join("..", "..", "examples", "serve"), nil)
			thread := "6f1c2b0e-0000-4000-8000-00000000c4a7"
			buf := make([]byte, 64<<10)
			post(b, url+"/threads", fmt.Sprintf(`{"thread_id": %q}`, thread), buf)
			turn := func(i int) {
				post(b, url+"/threads/"+thread+"/runs/wait", fmt.Sprintf(`{"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": "turn %d: hello, how are you today?"}]}}`, i), buf)
			}
			for i := range depth {
				turn(i)
			}
			b.ReportAllocs()
			i := depth
			for b.Loop() {
				turn(i)
				i++
			}
		})
	}
}

// post sends a JSON body and wants 200, reading the answer through buf
// (a fixed buffer: what a turn allocates is the figure).
func post(b *testing.B, url, body string, buf []byte) {
	b.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		b.Fatalf("POST %s: %d %s", url, res.StatusCode, msg)
	}
	if _, err := io.CopyBuffer(io.Discard, res.Body, buf); err != nil {
		b.Fatal(err)
	}
}
