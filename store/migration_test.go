package store

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/cairn-dev/cairn/store/driver"
)

func TestLoadMigrations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   fstest.MapFS
		want    []int
		wantErr error
	}{
		{"in order", fstest.MapFS{"m/0002_b.sql": {Data: []byte("B")}, "m/0001_a.sql": {Data: []byte("A")}}, []int{1, 2}, nil},
		{"a gap", fstest.MapFS{"m/0001_a.sql": {}, "m/0003_c.sql": {}}, nil, ErrInvalidArgument},
		{"a bad name", fstest.MapFS{"m/first.sql": {}}, nil, ErrInvalidArgument},
		{"not SQL", fstest.MapFS{"m/0001_a.txt": {}}, nil, ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := driver.LoadMigrations(tc.files, "m", map[int]string{2: "go"})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("LoadMigrations = %v, want %v", err, tc.wantErr)
			}
			if len(list) != len(tc.want) {
				t.Fatalf("got %d migrations, want %d", len(list), len(tc.want))
			}
			for i, v := range tc.want {
				if list[i].Version != v {
					t.Fatalf("migration %d is %d", i, list[i].Version)
				}
			}
			if len(list) == 2 && (list[0].SQL != "A" || list[1].Go != "go" || Latest(list) != 2) {
				t.Fatalf("migrations %+v", list)
			}
			if st := MigrationStatuses(list, 1); len(st) > 0 && (!st[0].Applied || len(list) == 2 && st[1].Applied) {
				t.Fatalf("statuses at version 1: %+v", st)
			}
			if p := Pending(list, 1); len(list) == 2 && (len(p) != 1 || p[0].Version != 2) {
				t.Fatalf("pending at version 1: %+v", p)
			}
		})
	}
}
