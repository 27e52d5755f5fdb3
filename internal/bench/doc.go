// Package bench implements the benchmark workloads W1 and W2 of
// docs/bench/W1.md, which `cairn bench` runs.
//
// W1: one thread, S steps of a one-node graph (START → step → step … →
// END while count < S), a durable checkpoint after every step, then one
// head-state load and one walk of the whole history with every state
// materialised. W2: 50 threads of W1 with S = 100, one after another, then
// the same 50 concurrently on a fresh store.
package bench
