package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/model/openai"
	"github.com/cairn-dev/cairn/store"
)

// memoryFlags configure the long-term memory store of cairn serve and
// cairn worker: the semantic index (an OpenAI-compatible embeddings
// endpoint) and the sweep of expired items.
type memoryFlags struct {
	url, model, keyEnv, fields string
	dims                       int
	sweep                      time.Duration
}

func (f *memoryFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.model, "store-index-model", "", "embedding model of the memory store's semantic search (e.g. text-embedding-3-small); unset: queries are full-text searches")
	fl.StringVar(&f.url, "store-index-url", "", "base URL of the OpenAI-compatible embeddings endpoint (e.g. http://localhost:11434/v1); empty: OpenAI")
	fl.IntVar(&f.dims, "store-index-dims", 0, "length of the model's vectors (required with --store-index-model)")
	fl.StringVar(&f.fields, "store-index-fields", "$", "comma-separated paths of the item fields indexed ($: the whole value; text, meta.title, tags[*] …)")
	fl.StringVar(&f.keyEnv, "store-index-key-env", "OPENAI_API_KEY", "environment variable holding the embeddings endpoint's API key (read, never stored or shown)")
	fl.DurationVar(&f.sweep, "store-ttl-sweep", time.Minute, "how often memory store items past their ttl are deleted (0: never; expired items are never returned either way)")
}

// fieldList splits --store-index-fields.
func (f memoryFlags) fieldList() []string {
	var out []string
	for p := range strings.SplitSeq(f.fields, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// check checks the flags before anything is opened.
func (f memoryFlags) check() error {
	switch {
	case f.model == "" && (f.url != "" || f.dims != 0):
		return usagef("--store-index-url and --store-index-dims need --store-index-model")
	case f.model != "" && f.dims <= 0:
		return usagef("--store-index-model %s needs --store-index-dims N, the length of its vectors", f.model)
	case f.sweep < 0:
		return usagef("--store-ttl-sweep %s: must not be negative", f.sweep)
	case len(f.fieldList()) == 0:
		return usagef("--store-index-fields %q: name at least one field, or $ for the whole value", f.fields)
	}
	for _, p := range f.fieldList() {
		if err := store.ParseFieldPath(p); err != nil {
			return usagef("--store-index-fields: %v", err)
		}
	}
	return nil
}

// memoryIndex is the index the flags configure, with the embeddings key
// it reads (to be redacted; "" without one): checked before any store is
// opened.
func (a *app) memoryIndex(f memoryFlags) (store.IndexConfig, string, error) {
	cfg := store.IndexConfig{Fields: f.fieldList()}
	if f.model == "" {
		return cfg, "", nil
	}
	emb, err := openai.NewEmbedder(openai.Config{BaseURL: f.url, Model: f.model, APIKeyEnv: f.keyEnv, Getenv: a.getenv})
	if errors.Is(err, openai.ErrConfig) {
		return cfg, "", usagef("--store-index-model %s: %v (--store-index-key-env names the variable)", f.model, err)
	}
	if err != nil {
		return cfg, "", err
	}
	cfg.Embed, cfg.Dims = emb, f.dims
	return cfg, a.getenv(f.keyEnv), nil
}

// memoryNote says what the server's memory store searches with.
func (f memoryFlags) note() string {
	if f.model == "" {
		return "memory search: full text"
	}
	return fmt.Sprintf("memory search: semantic (%s, %d dims)", f.model, f.dims)
}

// sweepItems deletes expired items every interval until ctx ends.
func sweepItems(ctx context.Context, is store.ItemStore, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n, err := is.Sweep(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("memory sweep failed", "err", err)
			case n > 0:
				log.Info("memory sweep", "expired_items", n)
			}
		}
	}()
}
