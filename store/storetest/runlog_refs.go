package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// testRunLogRefs checks what run logs keep beside their events' data —
// the attempt that logged each event and the checkpoint it refers to —
// and the retention of logs: a run's log deleted alone, the logs of runs
// that ended long ago trimmed, and the logs that referred to checkpoints
// a prune deleted going with them.
func testRunLogRefs(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(t, s, "refs")
	for i := 1; i <= 300; i++ {
		m.step(i)
	}
	now := time.Now()
	for i, r := range []struct {
		id, status string
		ended      time.Time
	}{{"old", "success", now.Add(-48 * time.Hour)}, {"new", "error", now.Add(-time.Minute)}, {"live", "running", now.Add(-48 * time.Hour)}} {
		rec := store.RunRecord{ID: r.id, Thread: "refs", Status: r.status, CreatedAt: int64(i + 1), UpdatedAt: r.ended.UnixNano(), Data: []byte(`{}`)}
		if err := rl.PutRun(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	logs := map[string][]store.EventRecord{
		"old":  {{Seq: 1, Attempt: 1, Data: []byte(`{"e":"metadata"}`)}, {Seq: 2, Attempt: 1, Ref: &store.EventRef{Seq: 2}, Data: []byte(`{"e":"values"}`)}},
		"new":  {{Seq: 1, Attempt: 1, Ref: &store.EventRef{Seq: 300}, Data: []byte(`{}`)}, {Seq: 2, Attempt: 3, Ref: &store.EventRef{Namespace: "sub:1", Seq: 4}, Data: []byte(`{}`)}},
		"live": {{Seq: 1, Attempt: 2, Ref: &store.EventRef{Seq: 1}, Data: []byte(`{}`)}},
	}
	for run, evs := range logs {
		if err := rl.AppendEvents(ctx, run, evs); err != nil {
			t.Fatal(err)
		}
		checkLog(t, rl, run, evs)
	}
	if err := rl.DeleteEvents(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting the log of a missing run: %v", err)
	}
	if _, err := s.Prune(ctx, store.PruneRequest{Thread: "refs", RunLogsOlderThan: time.Hour}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("trimming run logs of one thread: %v", err)
	}
	// Checkpoint 2 goes: the ended run whose log refers to it loses its
	// log (its record stays); the run still going keeps its own.
	res, err := s.Prune(ctx, store.PruneRequest{Thread: "refs", KeepLast: 3})
	if err != nil || res.Checkpoints == 0 || res.RunLogs != 1 {
		t.Fatalf("prune: %+v, %v (want checkpoints deleted and 1 run log)", res, err)
	}
	checkLog(t, rl, "old", nil)
	checkLog(t, rl, "new", logs["new"])
	checkLog(t, rl, "live", logs["live"])
	if _, err := rl.Run(ctx, "old"); err != nil {
		t.Fatalf("the record of a run whose log went: %v", err)
	}
	// Trimming: the logs of runs that ended more than a day ago go.
	if err := rl.AppendEvents(ctx, "old", logs["old"][:1]); err != nil {
		t.Fatal(err)
	}
	res, err = s.Prune(ctx, store.PruneRequest{RunLogsOlderThan: 24 * time.Hour, Now: now})
	if err != nil || res.RunLogs != 1 || res.Checkpoints != 0 || len(res.Deleted) != 0 {
		t.Fatalf("trim: %+v, %v (want 1 run log and nothing else)", res, err)
	}
	checkLog(t, rl, "old", nil)
	checkLog(t, rl, "new", logs["new"])
	checkLog(t, rl, "live", logs["live"])
	if err := rl.DeleteEvents(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	checkLog(t, rl, "new", nil)
}

// checkLog fails unless a run's log is want, attempts and references
// included.
func checkLog(t *testing.T, rl store.RunLog, run string, want []store.EventRecord) {
	t.Helper()
	got, err := rl.Events(context.Background(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(logText(got)) != fmt.Sprint(logText(want)) {
		t.Fatalf("log of %s:\n got %v\nwant %v", run, logText(got), logText(want))
	}
}

func logText(evs []store.EventRecord) []string {
	var out []string
	for _, ev := range evs {
		ref := "-"
		if ev.Ref != nil {
			ref = fmt.Sprintf("%s@%d", ev.Ref.Namespace, ev.Ref.Seq)
		}
		out = append(out, fmt.Sprintf("%d/%d/%s/%s", ev.Seq, ev.Attempt, ref, ev.Data))
	}
	return out
}
