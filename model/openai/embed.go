package openai

import (
	"context"
	"fmt"

	sdk "github.com/openai/openai-go/v3"

	"github.com/cairn-dev/cairn/agent"
)

// Embedder computes embeddings with an OpenAI-compatible embeddings
// endpoint (OpenAI, vLLM, Ollama, llama.cpp …); it implements
// store.Embedder, for the item store's semantic search
// (store.IndexConfig). Its errors are the chat model's: typed
// agent.ProviderErrors that never show the key.
type Embedder struct {
	m *Model
}

// maxEmbedBatch is how many texts one request carries (OpenAI takes up
// to 2048).
const maxEmbedBatch = 256

// NewEmbedder returns an embedder; cfg.Model names the embedding model
// (text-embedding-3-small …); Temperature and MaxTokens do not apply.
func NewEmbedder(cfg Config) (*Embedder, error) {
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Embedder{m: m}, nil
}

// Embed implements store.Embedder: one vector per text, in order, asked
// for in requests of at most 256 texts.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += maxEmbedBatch {
		batch := texts[start:min(start+maxEmbedBatch, len(texts))]
		vs, err := e.embed(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

func (e *Embedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	cctx, cancel := context.WithTimeout(ctx, e.m.cfg.Timeout)
	defer cancel()
	res, err := e.m.client.Embeddings.New(cctx, sdk.EmbeddingNewParams{
		Input:          sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		Model:          e.m.cfg.Model,
		EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat,
	})
	if err != nil {
		return nil, e.m.wrap(ctx, err)
	}
	out := make([][]float32, len(texts))
	for _, d := range res.Data {
		if d.Index < 0 || int(d.Index) >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("%w: openai: embeddings: index %d in an answer for %d texts", agent.ErrMalformed, d.Index, len(texts))
		}
		v := make([]float32, len(d.Embedding))
		for i, f := range d.Embedding {
			v[i] = float32(f)
		}
		out[d.Index] = v
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("%w: openai: embeddings: no vector for text %d of %d", agent.ErrMalformed, i, len(texts))
		}
	}
	return out, nil
}
