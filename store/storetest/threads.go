package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

func testThreads(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	for i := 0; i < 25; i++ {
		tenant := "a"
		if i%2 == 1 {
			tenant = "b"
		}
		_, err := s.CreateThread(ctx, store.Thread{ID: fmt.Sprintf("th-%02d", i), Tenant: tenant, Metadata: map[string]any{"user": fmt.Sprintf("u%d", i%3), "n": i, "x'); DROP TABLE threads;--": 1}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "th-00"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate create: %v", err)
	}
	checkThreadFilters(t, s)
	th, err := s.Thread(ctx, "th-03")
	if err != nil || th.Tenant != "b" || th.Metadata["user"] != "u0" || th.Head != 0 {
		t.Fatalf("thread = %+v, %v", th, err)
	}
	m := newModel(t, s, "th-03")
	m.step(1)
	if err := s.DeleteThread(ctx, "th-03"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Thread(ctx, "th-03"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted thread: %v", err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "th-03"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted thread load: %v", err)
	}
	if err := s.DeleteThread(ctx, "th-03"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	// A deleted thread starts again from seq 1.
	m2 := newModel(t, s, "th-03")
	m2.step(1)
	m2.checkLoad(0)
}

// checkThreadFilters lists the 25 threads testThreads made through
// filters, pages and limits, hostile keys and values included.
func checkThreadFilters(t *testing.T, s store.Store) {
	t.Helper()
	for _, tc := range []struct {
		name   string
		filter store.ThreadFilter
		want   int
		first  string // "" when any
	}{
		{"all, in pages", store.ThreadFilter{PageSize: 4}, 25, "th-00"},
		{"tenant b", store.ThreadFilter{Tenant: "b"}, 12, ""},
		{"user u1, in pages", store.ThreadFilter{Metadata: map[string]any{"user": "u1"}, PageSize: 2}, 8, ""},
		{"user u1 and n 4", store.ThreadFilter{Metadata: map[string]any{"user": "u1", "n": 4}}, 1, "th-04"},
		{"a hostile key", store.ThreadFilter{Metadata: map[string]any{"x'); DROP TABLE threads;--": 1}}, 25, ""},
		{"a hostile value", store.ThreadFilter{Metadata: map[string]any{"user": "' OR 1=1 --"}}, 0, ""},
		{"limit", store.ThreadFilter{Limit: 3}, 3, ""},
	} {
		var ids []string
		for th, err := range s.Threads(context.Background(), tc.filter) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, th.ID)
		}
		if len(ids) != tc.want || (tc.first != "" && ids[0] != tc.first) {
			t.Fatalf("threads, %s: %v", tc.name, ids)
		}
	}
	for _, err := range s.Threads(context.Background(), store.ThreadFilter{Metadata: map[string]any{"user": []int{1}}}) {
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("non-scalar filter: %v", err)
		}
	}
}

func testNamespaces(t *testing.T, h Harness) {
	s := open(t, h)
	root := newModel(t, s, "ns")
	sub := newModel(t, s, "ns")
	sub.ns = "policy:1"
	for i := 1; i <= 10; i++ {
		root.step(i)
		if i%2 == 0 {
			sub.step(100 + i)
		}
	}
	root.checkLoad(0)
	sub.checkLoad(0)
	sub.checkLoad(3)
	th, err := s.Thread(context.Background(), "ns")
	if err != nil || th.Head != 10 {
		t.Fatalf("root head %d, %v", th.Head, err)
	}
	if sub.head != 5 {
		t.Fatalf("sub head %d", sub.head)
	}
}
