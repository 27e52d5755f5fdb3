// Command cairn runs agent files and inspects and drives Cairn stores:
// run, resume, threads, state, history, forks, export, pruning and the
// built-in benchmark.
//
// Exit codes: 0 success, 1 runtime error (including not found, conflict or
// corrupt data), 2 usage error (bad flags, arguments or values), 3 a run
// stopped to wait for input (resume it with cairn resume THREAD --answer).
package main
