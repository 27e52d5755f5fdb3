package readfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/internal/readfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, readfile.Max+1); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"regular", "small.txt", nil},
		{"too large", "big.bin", readfile.ErrTooLarge},
		{"fifo", "fifo", readfile.ErrNotRegular},
		{"directory", ".", readfile.ErrNotRegular},
		{"missing", "nope", os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for via, read := range map[string]func() ([]byte, error){
				"path": func() ([]byte, error) { return readfile.Read(filepath.Join(dir, tc.path)) },
				"root": func() ([]byte, error) { return readfile.FromRoot(root, tc.path) },
			} {
				b, err := read()
				if !errors.Is(err, tc.want) || (tc.want == nil && string(b) != "hello") {
					t.Fatalf("%s: %q, %v; want %v", via, b, err, tc.want)
				}
			}
		})
	}
	if _, err := readfile.Read("/dev/zero"); !errors.Is(err, readfile.ErrNotRegular) {
		t.Fatalf("/dev/zero: %v", err)
	}
}
