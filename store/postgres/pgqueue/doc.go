// Package pgqueue is the run queue of a PostgreSQL store, over River: an
// HTTP server with a queue (server.Config.Queue) records each run and puts
// its job on its assistant's River queue, and workers (package worker,
// cairn worker) take the jobs. It lives beside store/postgres so that a
// program that only keeps checkpoints on PostgreSQL does not link River.
//
// Guarantees: a run's record and its job are written in one transaction
// of the store's database (postgres.Backend.RunTx), so both commit or
// neither does; retrying a run rewrites its record and makes its job
// available again in one transaction too, and is refused with
// store.ErrConflict while the job is running. Of seals the run records
// the queue writes as the store seals its run log (store.Options.Keyring).
// River's tables live in the store's schema (Migrate creates them).
package pgqueue
