package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// seedW1 writes W1's thread "0" with steps steps to the store at url.
func seedW1(t *testing.T, url string, steps string) {
	t.Helper()
	if code, _, errOut := cli(t, nil, "bench", "w1", "--steps", steps, "--store", url, "--json"); code != 0 {
		t.Fatalf("bench: %d %s", code, errOut)
	}
}

// TestHistoryFindsDeletedRows: a checkpoint row deleted outside Cairn
// breaks the chain of the checkpoints above it; cairn history (table,
// tree, JSON) says the store is damaged and what to do, with exit 1,
// instead of listing the rows above the gap as the whole history. A
// listing that stops above the gap, and history after a prune (whose
// boundary rows hold snapshots), still work.
func TestHistoryFindsDeletedRows(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var url string
			var del func(q string, args ...any)
			switch backend {
			case "sqlite":
				url = "sqlite:" + filepath.Join(t.TempDir(), "d.db")
				seedW1(t, url, "60")
				del = sqliteExec(t, strings.TrimPrefix(url, "sqlite:"))
			case "postgres":
				url, _ = pgtest.Schema(t, "cairn_damage")
				seedW1(t, url, "60")
				del = pgExec(t, url)
			}
			env := map[string]string{"CAIRN_STORE": url}
			if code, _, errOut := cli(t, env, "history", "0"); code != 0 {
				t.Fatalf("history before the damage: exit %d %s", code, errOut)
			}
			// Seq 30 goes; 31 names it as its parent (w1 writes patches there).
			if backend == "sqlite" {
				del(`DELETE FROM checkpoints WHERE id = (SELECT id FROM checkpoints ORDER BY id LIMIT 1 OFFSET 29)`)
			} else {
				del(`DELETE FROM cairn_checkpoints WHERE thread = '0' AND ns = '' AND seq = 30`)
			}
			for _, args := range [][]string{{"history", "0"}, {"history", "0", "--tree"}, {"history", "0", "--json"}, {"history", "0", "--before", "40"}} {
				code, out, errOut := cli(t, env, args...)
				if code != 1 || !strings.Contains(errOut, `thread "0" seq 31: corrupt history: its parent 30 is missing`) ||
					!strings.Contains(errOut, "PRAGMA integrity_check") || out != "" {
					t.Errorf("%v: exit %d\n%s\n%s", args, code, out, errOut)
				}
			}
			if code, _, errOut := cli(t, env, "history", "0", "--limit", "10"); code != 0 {
				t.Errorf("history --limit 10 (above the gap): exit %d %s", code, errOut)
			}
		})
	}
}

// TestHistoryAfterPrune: a pruned thread's history ends at the rows a
// prune left, which hold snapshots: no damage is reported.
func TestHistoryAfterPrune(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "p.db")
	seedW1(t, url, "60")
	env := map[string]string{"CAIRN_STORE": url}
	if code, out, errOut := cli(t, env, "prune", "--keep-last", "3", "--thread", "0", "--json"); code != 0 || strings.Contains(out, `"checkpoints": 0`) {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, args := range [][]string{{"history", "0"}, {"history", "0", "--tree"}, {"history", "0", "--states"}} {
		if code, _, errOut := cli(t, env, args...); code != 0 {
			t.Errorf("%v after a prune: exit %d %s", args, code, errOut)
		}
	}
}

// TestHistoryFindsFlippedBits flips, one at a time, each bit of the cells
// of the checkpoints table's root page, an interior b-tree page, of a real
// SQLite file holding 121 checkpoints. Whenever cairn history then lists
// the head (121) and exits 0, it lists the whole history unchanged: a
// flipped bit that makes SQLite skip or repeat rows below the head is
// reported as damage (exit 1, with what to do) — but for two losses a
// walk cannot tell from a history that holds together, which PRAGMA
// integrity_check finds: rows lost above the head (a shorter history),
// and a run of rows lost right below a row that holds its own snapshot
// (what a prune leaves: its oldest kept checkpoint, re-based).
func TestHistoryFindsFlippedBits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.db")
	seedW1(t, "sqlite:"+path, "120")
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.BigEndian.Uint16(clean[16:18]))
	start := pageStart(t, path, "checkpoints", pageSize)
	if clean[start] != 0x05 {
		t.Fatalf("the checkpoints root page has type %#x, want 0x05 (interior)", clean[start])
	}
	env := map[string]string{"CAIRN_STORE": "sqlite:" + path}
	_, want, _ := cli(t, env, "history", "0")
	snapshots := snapshotSeqs(t, env)
	boundaries := 0
	content := int(binary.BigEndian.Uint16(clean[start+5 : start+7]))
	caught := 0
	for b := content; b < pageSize; b++ {
		for bit := range 8 {
			damaged := append([]byte(nil), clean...)
			damaged[start+b] ^= 1 << bit
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := cli(t, env, "history", "0")
			switch {
			case code == 1 && strings.Contains(errOut, "corrupt"):
				if strings.Contains(errOut, "corrupt history") {
					if !strings.Contains(errOut, "PRAGMA integrity_check") {
						t.Fatalf("byte %d bit %d: %s", b, bit, errOut)
					}
					caught++
				}
			case code != 0:
				t.Fatalf("byte %d bit %d: exit %d %s", b, bit, code, errOut)
			case strings.Contains(out, "\n121 ") && out != want && lostBelowSnapshot(listedSeqs(want), listedSeqs(out), snapshots):
				boundaries++
			case strings.Contains(out, "\n121 ") && out != want:
				t.Errorf("byte %d bit %d: history lists the head and exits 0, but not the whole history:\n%s", b, bit, out)
			}
		}
	}
	if caught == 0 {
		t.Fatal("no flipped bit was reported as a damaged history")
	}
	t.Logf("%d flipped bits reported as a damaged history; %d lost rows right below a snapshot, as a prune would", caught, boundaries)
}

// snapshotSeqs are the checkpoints of thread 0 that hold their own
// snapshot.
func snapshotSeqs(t *testing.T, env map[string]string) map[int64]bool {
	t.Helper()
	out, _ := mustCLI(t, env, "history", "0", "--json")
	var cps []struct {
		Seq      int64 `json:"seq"`
		Snapshot bool  `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &cps); err != nil {
		t.Fatal(err)
	}
	out2 := map[int64]bool{}
	for _, cp := range cps {
		if cp.Snapshot {
			out2[cp.Seq] = true
		}
	}
	return out2
}

// listedSeqs are the seqs a cairn history table lists, in order.
func listedSeqs(table string) []int64 {
	var out []int64
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// lostBelowSnapshot reports whether got is want without one run of
// consecutive seqs, right below a seq that holds its own snapshot.
func lostBelowSnapshot(want, got []int64, snapshots map[int64]bool) bool {
	listed := map[int64]bool{}
	for _, s := range got {
		listed[s] = true
	}
	var lost []int64
	for _, s := range want {
		if !listed[s] {
			lost = append(lost, s)
		}
	}
	if len(lost) == 0 || len(got)+len(lost) != len(want) {
		return false
	}
	for i := 1; i < len(lost); i++ {
		if lost[i] != lost[i-1]-1 { // want is newest first
			return false
		}
	}
	above := lost[0] + 1
	return snapshots[above] && listed[above]
}

// pageStart is the file offset of a table's root page.
func pageStart(t *testing.T, path, table string, pageSize int) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var root int
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&root); err != nil {
		t.Fatal(err)
	}
	return (root - 1) * pageSize
}

// sqliteExec returns a function that runs a statement on a SQLite file.
func sqliteExec(t *testing.T, path string) func(q string, args ...any) {
	return func(q string, args ...any) {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// pgExec returns a function that runs a statement on a PostgreSQL store.
func pgExec(t *testing.T, url string) func(q string, args ...any) {
	return func(q string, args ...any) {
		t.Helper()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
}
