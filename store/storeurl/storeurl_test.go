package storeurl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
		ok   bool
	}{
		{"memory:", Spec{Scheme: "memory"}, true},
		{"sqlite:.cairn/state.db", Spec{Scheme: "sqlite", Path: ".cairn/state.db"}, true},
		{"sqlite:///tmp/x.db", Spec{Scheme: "sqlite", Path: "/tmp/x.db"}, true},
		{"sqlite:a.db?durability=strict", Spec{Scheme: "sqlite", Path: "a.db", Durability: sqlite.DurabilityStrict}, true},
		{"sqlite:a.db?durability=fast", Spec{}, false},
		{"sqlite:a.db?cache=1", Spec{}, false},
		{"sqlite:", Spec{}, false},
		{"memory:x", Spec{}, false},
		{"postgres://u@h:5432/db", Spec{Scheme: "postgres", DSN: "postgres://u@h:5432/db"}, true},
		{"postgres:db", Spec{}, false},
		{"state.db", Spec{}, false},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if tc.ok != (err == nil) || (tc.ok && got != tc.want) {
			t.Errorf("Parse(%q) = %+v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Parse(%q) error not typed: %v", tc.in, err)
		}
	}
}

func TestOpen(t *testing.T) {
	urls := []string{"memory:", "sqlite:" + filepath.Join(t.TempDir(), "d", "s.db")}
	if pg := os.Getenv("CAIRN_TEST_POSTGRES"); pg != "" {
		urls = append(urls, pg)
	}
	for _, u := range urls {
		s, err := Open(u, store.Options{}, "")
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
