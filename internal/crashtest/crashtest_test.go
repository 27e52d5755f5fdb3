package crashtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const childKey = "CAIRN_CRASHTEST_CHILD"

// TestHarness is also the child: it writes a file, then sleeps until it is
// killed (mode "sleep") or fails (mode "fail").
func TestHarness(t *testing.T) {
	RunChild(childKey, func() error {
		if err := os.WriteFile(os.Getenv("CRASHTEST_FILE"), []byte("started"), 0o644); err != nil {
			return err
		}
		if os.Getenv("CRASHTEST_MODE") == "fail" {
			return errors.New("failing on purpose")
		}
		time.Sleep(time.Minute)
		return nil
	})
	file := filepath.Join(t.TempDir(), "started")
	for _, tc := range []struct {
		mode       string
		wantKilled bool
	}{{"sleep", true}, {"fail", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			_ = os.Remove(file)
			cmd := Start(t, "TestHarness", childKey+"=1", "CRASHTEST_FILE="+file, "CRASHTEST_MODE="+tc.mode)
			WaitFor(t, 20*time.Second, "the child to start", func() bool { return FileContains(file, "started") })
			if tc.mode == "fail" {
				time.Sleep(300 * time.Millisecond) // let it exit by itself
			}
			killed, err := Kill(cmd)
			if killed != tc.wantKilled {
				t.Fatalf("killed = %v (%v), want %v", killed, err, tc.wantKilled)
			}
			if !tc.wantKilled && err == nil {
				t.Fatal("a child that failed ended cleanly")
			}
			if FileSize(file) != int64(len("started")) {
				t.Fatalf("FileSize = %d", FileSize(file))
			}
		})
	}
}
