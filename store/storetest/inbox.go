package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// testInbox checks threads' inboxes: entries numbered 1, 2, … per thread
// (racing appends get different numbers, a number never below the one a
// caller says is consumed), listed after a cursor in order, kept apart by
// tenant and thread (ids with periods too), marked with the run made of
// them, trimmed, and deleted with their thread or an emptied one.
func testInbox(t *testing.T, h Harness) {
	ctx := context.Background()
	s, e := openEngine(t, h)
	ib, err := store.InboxOf(s)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := store.ThreadKey("acme", "t.1"), store.ThreadKey("other", "t.1"), "t"
	for _, th := range []string{a, b, c} {
		if _, err := s.CreateThread(ctx, store.Thread{ID: th}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := ib.Append(ctx, a, 0, store.InboxSteer, json.RawMessage(`"hi"`)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := ib.Entries(ctx, a, 0)
	if err != nil || len(got) != 8 {
		t.Fatalf("entries: %d, %v", len(got), err)
	}
	for i, en := range got {
		if en.Seq != int64(i+1) || en.Kind != store.InboxSteer || string(en.Message) != `"hi"` || en.CreatedAt == 0 {
			t.Fatalf("entry %d: %+v", i, en)
		}
	}
	if last, err := ib.Last(ctx, a); err != nil || last != 8 {
		t.Fatalf("last: %d, %v", last, err)
	}
	if last, err := ib.Last(ctx, c); err != nil || last != 0 {
		t.Fatalf("last of an empty inbox: %d, %v", last, err)
	}
	if got, _ := ib.Entries(ctx, a, 6); len(got) != 2 || got[0].Seq != 7 {
		t.Fatalf("after 6: %+v", got)
	}
	for _, th := range []string{b, c} {
		if got, err := ib.Entries(ctx, th, 0); err != nil || len(got) != 0 {
			t.Fatalf("%s sees %d entries (%v)", th, len(got), err)
		}
	}
	testInboxEntries(t, s, e, ib, a, b, c)
	testInboxPrune(t, s, ib)
}

// testInboxEntries: numbering after a cursor, marks, refusals, trims and
// deletion with the thread.
func testInboxEntries(t *testing.T, s store.Store, e *store.Engine, ib *store.Inbox, a, b, c string) {
	ctx := context.Background()
	en, err := ib.Append(ctx, b, 41, store.InboxFollowUp, json.RawMessage(`{"role":"user","content":"x"}`))
	if err != nil || en.Seq != 42 {
		t.Fatalf("append after 41: %+v, %v", en, err)
	}
	if err := ib.MarkRun(ctx, b, 42, "r1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := ib.Entries(ctx, b, 0); len(got) != 1 || got[0].Run != "r1" || got[0].Kind != store.InboxFollowUp {
		t.Fatalf("marked: %+v", got)
	}
	if err := ib.MarkRun(ctx, b, 7, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("marking a missing entry: %v", err)
	}
	for _, bad := range []struct {
		kind string
		msg  string
	}{{"shout", `"x"`}, {store.InboxSteer, `{`}} {
		if _, err := ib.Append(ctx, c, 0, bad.kind, json.RawMessage(bad.msg)); !errors.Is(err, store.ErrInboxEntry) {
			t.Fatalf("append %s %s: %v", bad.kind, bad.msg, err)
		}
	}
	if _, err := ib.Append(ctx, "bad id", 0, store.InboxSteer, json.RawMessage(`"x"`)); !errors.Is(err, store.ErrInvalidID) {
		t.Fatalf("bad thread id: %v", err)
	}
	if n, err := ib.Trim(ctx, a, 5); err != nil || n != 5 {
		t.Fatalf("trim: %d, %v", n, err)
	}
	if en, err := ib.Append(ctx, a, 0, store.InboxSteer, json.RawMessage(`"next"`)); err != nil || en.Seq != 9 {
		t.Fatalf("after a trim: %+v, %v", en, err)
	}
	if err := e.EmptyThread(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := ib.Entries(ctx, a, 0); len(got) != 0 {
		t.Fatalf("an emptied thread keeps %d entries", len(got))
	}
	if last, _ := ib.Last(ctx, a); last != 0 {
		t.Fatalf("an emptied thread's last entry: %d", last)
	}
	if err := s.DeleteThread(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, _ := ib.Entries(ctx, b, 0); len(got) != 0 {
		t.Fatalf("a deleted thread keeps %d entries", len(got))
	}
}

// testInboxPrune: a prune deletes the entries every kept checkpoint
// consumed, and keeps those a kept checkpoint has not.
func testInboxPrune(t *testing.T, s store.Store, ib *store.Inbox) {
	ctx := context.Background()
	if _, err := s.CreateThread(ctx, store.Thread{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := ib.Append(ctx, "p", 0, store.InboxSteer, json.RawMessage(`"x"`)); err != nil {
			t.Fatal(err)
		}
	}
	doc := state.Doc{}
	for i, cursor := range []int64{0, 1, 2, 2, 3} {
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "p", Parent: int64(i), State: doc, Meta: store.Meta{Usage: &store.Usage{Steps: int64(i), Inbox: cursor}}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Prune(ctx, store.PruneRequest{Thread: "p", KeepLast: 2})
	if err != nil || res.InboxEntries != 2 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	if left, _ := ib.Entries(ctx, "p", 0); len(left) != 2 || left[0].Seq != 3 {
		t.Fatalf("left after the prune: %+v", left)
	}
}
