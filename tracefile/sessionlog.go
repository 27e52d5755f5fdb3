package tracefile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// SessionLog is seed 003's session history file.
type SessionLog struct {
	ThreadID string          `json:"thread_id"`
	SavedAt  time.Time       `json:"saved_at"`
	Head     int64           `json:"checkpoint"`
	Messages json.RawMessage `json:"messages"`
}

// ExportSessionLog writes the thread's messages to
// dir/session_{thread}_{timestamp}.json and returns the path.
func ExportSessionLog(ctx context.Context, s store.Store, thread, dir string, now time.Time) (string, error) {
	cp, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		return "", err
	}
	msgs, ok := cp.State.Raw("messages")
	if !ok {
		msgs = json.RawMessage("[]")
	}
	log := SessionLog{ThreadID: thread, SavedAt: now.UTC(), Head: cp.Seq, Messages: msgs}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("session_%s_%s.json", thread, now.UTC().Format("20060102T150405.000Z")))
	return path, writeJSON(path, log)
}
