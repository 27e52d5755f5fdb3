// Package gcpace paces the Go collector by the size of the live heap.
//
// With the default GOGC=100 a process may grow to twice its live heap
// before the collector runs. That headroom is too little for a small heap
// and a lot for a large one. A small heap collected every few megabytes
// runs the collector dozens of times a second under a busy workload, on
// the core beside the one committing (`cairn bench w1 --steps 3000`
// collected 30 times at GOGC=100 and 11 times with the floor below, for
// about 2 µs less CPU a step); a process holding a 250 MB state would peak
// near 500 MB for garbage alone. A Pacer sets GOGC after each collection
// so that the headroom is a quarter of the live heap but never below a
// floor (16 MiB by default), between GOGC=25 and GOGC=400: small
// processes trade a few megabytes for far fewer collections, large ones a
// little collector work for a peak much closer to what they hold.
//
// The cairn binary starts a Pacer unless GOGC is set in its environment.
package gcpace
