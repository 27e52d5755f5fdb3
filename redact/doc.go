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
// # Streams
//
// Stream redacts a text that arrives in pieces (a model's reply, token by
// token) and releases each piece as soon as it cannot become part of a
// secret. It runs String's own expressions (secret shapes and literals,
// then key=value forms, then URL passwords) on the text as it arrives,
// with an incremental machine that finds what package regexp finds
// (leftmost-first, the same assertions, the same UTF-8 decoding), and
// holds back only the text a match could still cover: the start of a
// literal secret, an open shape ("sk-" and fewer than 16 more characters,
// or more that may go on; "Bearer …"; a PEM private key block before its
// end), a secret key's value before its end, a URL's password before its
// '@'. The key of a key=value form and a URL's user are released at once:
// the replacement keeps them. Joined, the released pieces are exactly what
// String returns for the whole text; FuzzStream and FuzzStreamMachine
// check it, and TestStreamEveryCut cuts texts holding every kind of
// secret at every byte.
//
// The hold-back is bounded: at most DefaultHoldLimit bytes (8 KiB;
// StreamLimit sets another). Past the limit the stream releases
// "[REDACTED]" for what it held and releases nothing more until that text
// is settled, then goes on exactly; the output is String's with that
// stretch replaced, never more of the text. Memory is the held text (in
// the pathological case of a shape that never ends, the rest of the text).
// Streaming costs about what String costs for the whole text (see
// BenchmarkStream); a redactor compiles its stream expressions once, on
// first use.
//
// Redaction is deterministic and idempotent: the same input always gives
// the same output, and redacting redacted data changes nothing, so a
// runner that redacts before committing keeps resumed runs byte-identical.
// A nil *Redactor is valid and redacts nothing. A Redactor is immutable
// and safe for concurrent use.
package redact
