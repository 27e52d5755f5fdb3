// Package backoff is Cairn's one retry delay policy: exponential backoff
// with full jitter, capped, that waits at least as long as a server asked
// (Retry-After). flow's node retries and agent.WithRetry both use it.
package backoff
