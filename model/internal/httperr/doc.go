// Package httperr is the HTTP plumbing the model providers share: a
// status mapped to agent's sentinel errors, Retry-After read, failures
// without an answer (timeouts, bodies that do not decode, transport
// errors) turned into *agent.ProviderError. Users program against the
// errors in package agent; this is how providers make them.
package httperr
