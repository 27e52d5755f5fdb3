// Package codesize keeps Cairn's code short enough to read at once: its
// test fails when a function outside tests is longer than MaxLines lines
// or has a cyclomatic complexity over MaxComplexity, unless the function's
// doc comment gives the reason on a line starting "Long:", and when a file
// outside tests is longer than MaxFileLines, unless a comment above its
// package clause (not the package doc) gives the reason the same way.
package codesize
