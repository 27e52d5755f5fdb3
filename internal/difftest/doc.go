// Package difftest holds Cairn's differential property test of delta
// storage (docs/proofs.md). Its tests generate graphs — parallel branches
// writing the same fields under every reducer, message replace, remove and
// remove-all, Send fan-out, a subgraph, interrupts — and operation scripts
// (runs, resumes, UpdateState as a node, forks from old checkpoints with a
// patch or an update, Prune, CopyThread, rekey, reopening the store) from
// fuzz bytes, run them on the memory, SQLite and PostgreSQL stores with
// encryption on and off, and check at every checkpoint that the state the
// runner held in memory, the state loaded from the store, the state a fresh
// process rebuilds and the state of a small reference interpreter written
// independently of Cairn are one and the same.
//
// The package has no code of its own outside its tests:
//
//	go test ./internal/difftest -run 'TestDifferential' -count=1
//	CAIRN_SOAK_STEPS=1000000 go test ./internal/difftest -run TestSoak -timeout 0 -v
package difftest
