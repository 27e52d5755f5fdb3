package store

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// ExportBundle writes thread (its key, ThreadKey) of store s to w as one
// bundle (docs/bundles.md): its record and metadata, every namespace's
// checkpoints with their patches, snapshots, statuses, metadata, times
// and external ids, their pending writes, and the thread's runs with
// their event logs, all as plaintext (an encrypted store's blobs are
// opened with its keys), checksummed with SHA-256. The bundle names the
// thread by its id without its tenant. s must be an *Engine.
func ExportBundle(ctx context.Context, s Store, thread string, w io.Writer) (BundleInfo, error) {
	e, ok := s.(*Engine)
	if !ok {
		return BundleInfo{}, fmt.Errorf("%w: bundles are made from a store's engine (*store.Engine)", ErrInvalidArgument)
	}
	return e.exportBundle(ctx, thread, w)
}

// ImportOptions says where ImportBundle puts a bundle's thread.
type ImportOptions struct {
	// As is the new thread's id; empty keeps the bundle's.
	As string
	// Tenant owns the new thread (its key is ThreadKey(Tenant, id)),
	// whatever tenant the exported thread had.
	Tenant string
	// MaxBytes bounds the bundle read (0: DefaultMaxBundle).
	MaxBytes int64
}

// DefaultMaxBundle is the largest bundle ImportBundle reads unless told
// otherwise (ImportOptions.MaxBytes).
const DefaultMaxBundle = 1 << 30

// BundleInfo describes a bundle written or imported.
type BundleInfo struct {
	// Thread is the thread's key in the store (exported, or created).
	Thread string
	// Source is the id the bundle gives the thread (without a tenant).
	Source      string
	Namespaces  int
	Checkpoints int
	Writes      int
	Runs        int
	Events      int
	// Bytes is the bundle's size.
	Bytes int64
}

// ImportBundle reads a bundle from r and creates its thread in store s,
// sealed with s's keys when s is encrypted. Everything is checked before
// anything is created: the format and checksum, the structure, and that
// every checkpoint's patch, applied to its parent's state, gives the
// state the bundle records for it (ErrBadBundle, ErrUnsupportedFormat for
// a newer format). A thread with the new id that exists is ErrConflict
// and is left as it is. On a backend that implements driver.ThreadLoader
// the thread is written in one transaction; on another, a failed write
// deletes what it made. Runs keep their ids unless one is taken in s, or
// the thread is renamed: then every run gets an id derived from the new
// thread and its old id, and the run data and events' string values
// equal to the old thread or run id are renamed with it. A run that had
// not ended (pending, running) is imported as interrupted: it runs where
// the bundle was made, not in s. s must be an *Engine.
func ImportBundle(ctx context.Context, s Store, r io.Reader, opts ImportOptions) (BundleInfo, error) {
	e, ok := s.(*Engine)
	if !ok {
		return BundleInfo{}, fmt.Errorf("%w: bundles are imported into a store's engine (*store.Engine)", ErrInvalidArgument)
	}
	return e.importBundle(ctx, r, opts)
}

// CheckBundle reads a bundle of at most maxBytes bytes (0:
// DefaultMaxBundle) and checks it as ImportBundle does, without a store:
// what a program may do before it opens or creates the store to import
// into. The BundleInfo it returns has no Thread.
func CheckBundle(r io.Reader, maxBytes int64) (BundleInfo, error) {
	b, p, err := readBundle(r, maxBytes)
	if err != nil {
		return BundleInfo{}, err
	}
	info := BundleInfo{Source: p.man.Thread, Namespaces: len(p.man.Namespaces), Checkpoints: len(p.cps), Runs: len(p.runs), Bytes: int64(len(b))}
	for _, cp := range p.cps {
		info.Writes += len(cp.Writes)
	}
	for _, r := range p.runs {
		info.Events += len(r.Events)
	}
	return info, nil
}

// cairnVersion is the version of the Cairn module, for a bundle's
// manifest.
func cairnVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/cairn-dev/cairn" {
				return m.Version
			}
		}
		if bi.Main.Path == "github.com/cairn-dev/cairn" {
			return bi.Main.Version
		}
	}
	return "(unknown)"
}

// The sections' JSON (docs/bundles.md). Opaque bytes are base64.

type bundleManifest struct {
	Format     int      `json:"format"`
	Cairn      string   `json:"cairn"`
	Thread     string   `json:"thread"`
	ExportedAt int64    `json:"exported_at"`
	Namespaces []string `json:"namespaces"`
}

type bundleThread struct {
	CreatedAt int64  `json:"created_at"`
	Metadata  []byte `json:"metadata,omitempty"`
}

type bundleCheckpoint struct {
	Namespace string `json:"ns"`
	Seq       int64  `json:"seq"`
	Parent    int64  `json:"parent"`
	Status    int    `json:"status"`
	CreatedAt int64  `json:"created_at"`
	Meta      []byte `json:"meta,omitempty"`
	// Patch and Snapshot are package state's binary forms (EncodePatch,
	// EncodeDoc); State is the SHA-256 (hex) of the state's JSON, on a
	// checkpoint that ends a branch; Sum is rowDigest's.
	Patch      []byte        `json:"patch"`
	Snapshot   []byte        `json:"snapshot,omitempty"`
	State      string        `json:"state"`
	ExternalID string        `json:"external_id,omitempty"`
	Writes     []bundleWrite `json:"writes,omitempty"`
	Sum        string        `json:"sum"`
}

type bundleWrite struct {
	Task   string `json:"task"`
	Node   string `json:"node"`
	Update []byte `json:"update"`
}

type bundleRun struct {
	ID        string        `json:"id"`
	Status    string        `json:"status"`
	CreatedAt int64         `json:"created_at"`
	UpdatedAt int64         `json:"updated_at"`
	Data      []byte        `json:"data,omitempty"`
	Events    []bundleEvent `json:"events,omitempty"`
}

type bundleEvent struct {
	Seq     int64  `json:"seq"`
	Attempt int    `json:"attempt,omitempty"`
	RefNS   string `json:"ref_ns,omitempty"`
	RefSeq  int64  `json:"ref_seq,omitempty"`
	Data    []byte `json:"data"`
}
