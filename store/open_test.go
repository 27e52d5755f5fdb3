package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/store/driver"
)

type fakeDriver struct{ opened *string }

func (fakeDriver) Check(url string) error {
	if url == "fake:bad" {
		return ErrInvalidArgument
	}
	return nil
}

// errFakeOpened is what the fake driver's Open returns: the URL reached it.
var errFakeOpened = errors.New("fake driver: opened")

func (d fakeDriver) Open(_ context.Context, url string, _ driver.OpenOptions) (driver.Backend, error) {
	*d.opened = url
	return nil, errFakeOpened
}

func TestRegistry(t *testing.T) {
	var opened string
	driver.Register("fake-registry-test", fakeDriver{&opened})
	if !slices.Contains(Schemes(), "fake-registry-test") {
		t.Fatalf("Schemes() = %v", Schemes())
	}
	for _, tc := range []struct {
		url     string
		wantErr error
	}{
		{"fake-registry-test:x", nil},
		{"no-scheme", ErrInvalidArgument},
		{":x", ErrInvalidArgument},
		{"nosuch:x", ErrInvalidArgument},
	} {
		t.Run(tc.url, func(t *testing.T) {
			opened = ""
			_, err := Open(context.Background(), tc.url, OpenOptions{})
			if tc.wantErr == nil && errors.Is(err, errFakeOpened) {
				err = nil
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Open(%q) = %v, want %v", tc.url, err, tc.wantErr)
			}
			if tc.wantErr == nil && opened != tc.url {
				t.Fatalf("driver opened %q", opened)
			}
			if tc.wantErr != nil && opened != "" {
				t.Fatal("a refused URL reached the driver")
			}
		})
	}
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		fn()
	}
	mustPanic("a second Register", func() { driver.Register("fake-registry-test", fakeDriver{&opened}) })
	mustPanic("a nil driver", func() { driver.Register("fake-nil", nil) })
}
