// Package codesize keeps Cairn's functions short enough to read at once:
// its test fails when a function outside tests is longer than MaxLines
// lines or has a cyclomatic complexity over MaxComplexity, unless the
// function's doc comment gives the reason on a line starting "Long:".
package codesize
