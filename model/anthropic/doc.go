// Package anthropic is an agent.Model for Anthropic's Messages API through
// the official anthropic-sdk-go SDK: system prompts, tool use and tool
// results, JSON-schema output, token usage. Errors become
// agent.ProviderError with the agent sentinels, as in model/openai; the
// SDK's own retries are off (wrap with agent.WithRetry); the API key comes
// from a named environment variable and never appears in an error.
package anthropic
