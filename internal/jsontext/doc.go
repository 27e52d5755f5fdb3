// Package jsontext appends JSON text for the values Cairn encodes on its
// hot paths (the update values of a step, a checkpoint's metadata) byte for
// byte as encoding/json writes them, without reflection: strings with
// encoding/json's escaping, and floats in its format. Anything unusual
// falls back to encoding/json itself, so the output never differs.
package jsontext
