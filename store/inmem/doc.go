// Package inmem is the in-memory reference backend of Cairn's store: every
// guarantee of the store package except durability. Use it in tests and for
// runs that need no history after the process ends.
package inmem
