// Package jsontext appends JSON text for the values Cairn encodes on its
// hot paths (the update values of a step, a checkpoint's metadata) byte for
// byte as encoding/json writes them, without reflection: strings with
// encoding/json's escaping, and floats in its format. Anything unusual
// falls back to encoding/json itself, so the output never differs.
//
// It also writes JSON for people: Readable, Marshal, MarshalIndent,
// Encoder and Writer write what a user reads (stdout, output files, gate
// files) without the \u003c, \u003e and \u0026 escapes encoding/json adds
// for HTML and stored documents keep.
package jsontext
