package runs

import (
	"log/slog"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestLogResume: a reader that reconnects with an event past a log's tail
// goes on where it should. On a log of a later attempt than the reader's
// (a server that took the run over after a crash), the reader's events
// past the tail were lost and are not coming: it goes back to the tail,
// and receives the later attempt's events numbered from there — even
// before the later attempt wrote any (it skipped them before: a client
// that read one event more than the store kept lost the first event of
// the next attempt).
func TestLogResume(t *testing.T) {
	prior := func(n int) []*Event {
		out := make([]*Event, n)
		for i := range out {
			out[i] = &Event{Event: "updates", Seq: int64(i + 1), Attempt: 1}
		}
		return out
	}
	tests := []struct {
		name        string
		logAttempt  int
		prior, seq  int64
		readerAtt   int
		appendFirst bool // the log's attempt wrote an event before the reader came
		want        int64
	}{
		{"a later attempt, nothing of its own yet", 2, 5, 7, 1, false, 5},
		{"a later attempt, one event of its own", 2, 5, 7, 1, true, 5},
		{"a reader within the log", 2, 5, 3, 1, false, 3},
		{"the same attempt, ahead of the log", 1, 5, 7, 1, false, 7},
		{"from the start", 2, 5, 0, 1, false, 0},
	}
	rl, err := store.RunLogOf(inmem.Open(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newEventLog("r", "t", tc.logAttempt, rl, slog.Default(), nil, prior(int(tc.prior)))
			if tc.appendFirst {
				l.append(&Event{Event: "updates"})
			}
			if got := l.resume(tc.seq, tc.readerAtt); got != tc.want {
				t.Fatalf("resume(%d, attempt %d) = %d, want %d", tc.seq, tc.readerAtt, got, tc.want)
			}
		})
	}
}
