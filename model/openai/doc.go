// Package openai is an agent.Model for any OpenAI-compatible chat
// completions server (OpenAI, vLLM, Ollama, llama.cpp), through the official
// openai-go SDK: tool calls, JSON-schema response formats, token usage.
// Errors become agent.ProviderError with the agent sentinels (401 → ErrAuth,
// 404 → ErrModelNotFound, 429 → ErrRateLimited with Retry-After, 5xx →
// ErrServer, timeouts → ErrTimeout, undecodable bodies → ErrMalformed). The
// SDK's own retries are off: wrap the model with agent.WithRetry. The API
// key is read from a named environment variable and never appears in an
// error.
//
// Embedder computes embeddings with the same kind of server's
// /embeddings endpoint, for the item store's semantic search
// (store.IndexConfig).
package openai
