package difftest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres" // the postgres:// scheme
	_ "github.com/cairn-dev/cairn/store/sqlite"   // the sqlite: scheme
)

// backend opens one store, again and again, over the same data.
type backend struct {
	name string
	// url is what a fresh process opens ("" for memory: a fresh engine
	// over the same rows stands in for it).
	url  string
	open func(ctx context.Context, o store.Options) (*store.Engine, error)
}

// keepOpen is the memory backend with a Close that keeps its rows, so
// that a new engine (a reopen, a rekey) finds them.
type keepOpen struct{ *inmem.Backend }

func (keepOpen) Close() error { return nil }

func memBackend() *backend {
	mem := inmem.New()
	return &backend{name: "inmem", open: func(_ context.Context, o store.Options) (*store.Engine, error) {
		return store.New(keepOpen{mem}, o), nil
	}}
}

func urlBackend(name, url string) *backend {
	return &backend{name: name, url: url, open: func(ctx context.Context, o store.Options) (*store.Engine, error) {
		return store.Open(ctx, url, store.OpenOptions{Store: o})
	}}
}

// newBackend makes a fresh store of a kind for one program.
func newBackend(t testing.TB, kind string) *backend {
	switch kind {
	case "inmem":
		return memBackend()
	case "sqlite":
		return urlBackend(kind, "sqlite:"+filepath.Join(t.TempDir(), "cairn.db"))
	case "postgres":
		dsn, _ := pgtest.Schema(t, "cairn_diff")
		return urlBackend(kind, dsn)
	}
	t.Fatalf("unknown backend %q", kind)
	return nil
}

// dump lists every checkpoint of the threads, every namespace, as a
// history walk with states rebuilds them: key "thread ns seq", value
// "status parent state" (canonical JSON).
func dump(ctx context.Context, s store.Store, threads []string) (map[string]string, error) {
	out := map[string]string{}
	for _, th := range threads {
		nss, err := s.Namespaces(ctx, th)
		if err != nil {
			return nil, fmt.Errorf("namespaces of %s: %w", th, err)
		}
		for _, ns := range nss {
			for cp, err := range s.History(ctx, store.HistoryRequest{Thread: th, Namespace: ns.Name, WithState: true, PageSize: 7}) {
				if err != nil {
					return nil, fmt.Errorf("history of %s %q: %w", th, ns.Name, err)
				}
				st, err := canonJSON([]byte(cp.State.String()))
				if err != nil {
					return nil, err
				}
				out[fmt.Sprintf("%s %s %d", th, ns.Name, cp.Seq)] = fmt.Sprintf("%s %d %s", cp.Status, cp.Parent, st)
			}
		}
	}
	return out, nil
}

// The fresh process: the test binary run again with these variables.
const (
	envRebuildURL     = "CAIRN_DIFFTEST_URL"
	envRebuildThreads = "CAIRN_DIFFTEST_THREADS"
	rebuildPrefix     = "CHECKPOINT\t"
)

// TestRebuildHelper is the fresh process: it opens the store the
// environment names, read-only, with the keys of CAIRN_ENCRYPTION_KEYS,
// and prints every checkpoint it rebuilds. Without the variables it is
// skipped.
func TestRebuildHelper(t *testing.T) {
	url := os.Getenv(envRebuildURL)
	if url == "" {
		t.Skip("the fresh process of TestDifferential (" + envRebuildURL + " unset)")
	}
	ctx := context.Background()
	ring, err := store.KeyringFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, url, store.OpenOptions{ReadOnly: true, Store: store.Options{Keyring: ring, SnapshotCache: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := dump(ctx, s, strings.Split(os.Getenv(envRebuildThreads), ","))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	for k, v := range d {
		fmt.Fprintf(w, "%s%s\t%s\n", rebuildPrefix, k, v)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// rebuild runs the fresh process on a store that is closed, or — for the
// memory store — dumps it through a new engine without a cache.
func rebuild(ctx context.Context, be *backend, keys [][]byte, threads []string) (map[string]string, error) {
	if be.url == "" {
		e, err := be.open(ctx, store.Options{Keyring: ringOf(keys), SnapshotCache: -1})
		if err != nil {
			return nil, err
		}
		defer e.Close()
		return dump(ctx, e, threads)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestRebuildHelper$", "-test.count=1")
	enc := make([]string, len(keys))
	for i, k := range keys {
		enc[i] = base64.StdEncoding.EncodeToString(k)
	}
	cmd.Env = append(os.Environ(), envRebuildURL+"="+be.url, envRebuildThreads+"="+strings.Join(threads, ","),
		store.EnvEncryptionKeys+"="+strings.Join(enc, ","), store.EnvEncryptionKeysFile+"=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("fresh process: %w\n%s%s", err, outb, stderr.Bytes())
	}
	out := map[string]string{}
	for line := range strings.Lines(string(outb)) {
		rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), rebuildPrefix)
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(rest, "\t")
		out[k] = v
	}
	return out, nil
}

// ringOf is the keyring of keys, newest first; nil for none.
func ringOf(keys [][]byte) *store.Keyring {
	if len(keys) == 0 {
		return nil
	}
	ring, err := store.NewKeyring(keys...)
	if err != nil {
		panic(err) // 32-byte keys, all different
	}
	return ring
}

// testKey is the i-th key a program uses.
func testKey(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, 32) }
