// Package yamlerr places YAML errors in the files users write: the line of
// the error in the whole file and the message without the library's
// prefixes, and, for strict decoding, the unknown key and its line. The
// YAML library reports these only as text, so this package is the one
// place that reads it.
package yamlerr
