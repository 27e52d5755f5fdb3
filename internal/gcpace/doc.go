// Package gcpace paces the Go collector by the size of the live heap.
//
// With the default GOGC=100 a process may grow to twice its live heap
// before the collector runs. That headroom is nothing for a small heap and
// a lot for a large one: a process holding a 250 MB state would peak near
// 500 MB for garbage alone. A Pacer lowers GOGC as the live heap grows so
// that the headroom stays near a quarter of the live heap (and never below
// a floor, 8 MiB by default), between GOGC=25 and GOGC=100. Small
// processes keep the default pace and its low CPU cost; large ones trade a
// little collector work for a peak much closer to what they hold.
//
// The cairn binary starts a Pacer unless GOGC is set in its environment.
package gcpace
