// Command cairn runs agent files and gate pipelines and inspects and drives
// Cairn stores: run, resume, threads, namespaces, state, history, forks,
// export, pruning and the built-in benchmark.
//
// Each cairn run is a new run on a new thread (printed first) unless
// --thread names one; everything is checked before anything is stored.
// cairn resume continues a run (after a crash, a failed step, an interrupt
// or a fork) with the model and options it was started with, kept in the
// thread's metadata. Read commands open the store read-only and never
// create one.
//
// Exit codes: 0 success, 1 runtime error (including not found, conflict or
// corrupt data), 2 usage error (bad flags, arguments or values, a malformed
// file, a run refused before it started), 3 a run stopped to wait for input
// (resume it with cairn resume THREAD --answer).
package main
