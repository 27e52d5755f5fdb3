// Command cairn inspects and drives Cairn stores: threads, state, history,
// forks, pruning and the built-in benchmark.
//
// Exit codes: 0 success, 1 runtime error (including not found, conflict or
// corrupt data), 2 usage error (bad flags, arguments or values).
package main
