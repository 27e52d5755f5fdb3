// Package gcpace paces the Go collector by the size of the live heap.
//
// With the default GOGC=100 a process may grow to twice its live heap
// before the collector runs. That headroom is too little for a small heap
// and a lot for a large one. A heap of a few megabytes under a busy
// workload is collected dozens of times a second, on the core beside the
// one doing the work (`cairn bench w1 --steps 3000` collected 30 times at
// GOGC=100 and 14 times paced, for about 2 µs less CPU a step); a process holding a 250 MB
// state would peak near 500 MB for garbage alone. A Pacer sets GOGC after
// each collection so that the headroom is a quarter of the live heap but
// never below a floor (8 MiB by default), between GOGC=25 and GOGC=400:
// heaps under 8 MiB get the floor (GOGC above 100), heaps over 32 MiB a
// quarter (GOGC 25), trading a little collector work for a peak much
// closer to what they hold.
//
// The cairn binary starts a Pacer unless GOGC is set in its environment.
package gcpace
