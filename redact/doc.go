// Package redact removes secrets from text, JSON documents and errors
// before they are stored, shown or logged.
//
// A Redactor hides three kinds of secrets:
//
//   - Values under secret keys. A JSON object member whose name is a secret
//     key has its value replaced by "[REDACTED]" (at any depth; null and ""
//     are kept, there is nothing to hide). Key names match exactly but
//     ignoring case and the separators '-' and '_': the key "api_key"
//     matches "api_key", "API-KEY", "apiKey" and "apikey", not "api_keys"
//     or "my_api_key".
//   - Secret shapes. Every string (object member names included) is
//     scanned with regular expressions; each match is replaced by
//     "[REDACTED]".
//   - Literal values known at run time (an API key read from the
//     environment), added with WithSecrets.
//
// Unless Config.NoDefaults is set, the defaults below apply, and
// Config.Keys and Config.Patterns add to them.
//
// Default keys: password, passwd, secret, token, api_key (so apiKey,
// API_KEY...), authorization, access_token, refresh_token, client_secret,
// private_key, x-api-key.
//
// Default shapes: OpenAI/Anthropic style keys (sk-..., 16+ characters
// after "sk-"), "Bearer <token>" (8+ token characters, any case), AWS
// access key ids (AKIA/ASIA + 16), GitHub tokens (ghp_, gho_, ghu_, ghs_,
// ghr_, github_pat_), Slack tokens (xox?-), Google API keys (AIza...), PEM
// private key blocks, and the password of URLs
// (postgres://user:[REDACTED]@host/db).
//
// Redaction is deterministic and idempotent: the same input always gives
// the same output, and redacting redacted data changes nothing, so a
// runner that redacts before committing keeps resumed runs byte-identical.
// A nil *Redactor is valid and redacts nothing. A Redactor is immutable
// and safe for concurrent use.
package redact
