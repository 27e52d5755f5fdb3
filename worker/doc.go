// Package worker runs the runs that run services queue (runs.Config.Queue:
// cairn serve --queue, cairn run --queue) on a PostgreSQL store, in as
// many processes on as many machines as wanted: cairn worker wraps it. A
// worker executes each run with a runs.Service (runs.Service.Execute); it
// serves no HTTP.
//
// The queue is River (riverqueue/river) in the store's own database: a
// run's record and its job are written in one transaction, each
// assistant's runs go to a queue of their own (a worker takes only the
// runs of the assistants it has). A run whose worker went silent (its
// thread's lease expired) is taken over by the first worker to acquire the
// lease, within half a lease; River also rescues its job after
// Config.RescueAfter (a worker then finds the run ended and completes the
// job).
//
// River has no fencing, so a worker holds the lease of the run's thread
// (store.LeaseStore) while it runs it, renews it, and appends under its
// fencing token (store.WithFence): a worker that was paused past its lease
// and whose run another worker took over finds its next append refused
// (store.ErrFenced) and stops without writing. Completed steps are never
// run again: the next worker resumes from the last checkpoint. A thread's
// runs are run one at a time, oldest first.
package worker
