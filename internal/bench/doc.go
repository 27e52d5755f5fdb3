// Package bench implements the benchmark workloads W1 to W4 of
// docs/bench/W1.md and docs/benchmarks.md, which `cairn bench` runs.
//
// W1: one thread, S steps of a one-node graph (START → step → step … →
// END while count < S), a durable checkpoint after every step, then one
// head-state load and one walk of the whole history with every state
// materialised. W2: 50 threads of W1 with S = 100, one after another, then
// the same 50 concurrently on a fresh store.
//
// W3 and W4 measure the server: a chat assistant (ChatGraph) served by
// server.New in a process of its own (ServeMain, started again through a
// Program), every request's handler timed. W3 (RunW3) drives one thread
// for N turns through runs/wait and runs/stream on one keep-alive
// connection and reads what the store keeps per turn; W4 (RunW4) creates T
// threads through the Go API and times the thread listings, the count, the
// pending interrupts and the CLI's listing. Both check every answer and
// fail with ErrCheck when one is wrong.
package bench
