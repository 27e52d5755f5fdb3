// Package pipeline runs gate pipelines (YAML files listing gates, each an
// agent file or a registered Go step with a JSON Schema contract and a
// pass threshold) on the flow runner.
//
// A pipeline becomes one node per gate; each gate runs its agent file in
// namespace gateN of the thread (package agentfile) or its Go step, on the
// previous gate's committed output, and its step commits the gate file and
// the pipeline file as state. The files in
// state_dir/<thread>/{domain}-{feature}-gate{N}-output.json and
// -pipeline.json are written after each commit from the committed head,
// under a lock on the thread's folder (flock; on systems without it,
// concurrent writers in other processes are not ordered), each replaced
// atomically; so they never contradict the store once writers are done. A
// write that fails stops the run before its next gate (ErrFiles); a resume
// writes the files first, and Pipeline.WriteFiles rewrites a finished
// thread's. A gate with approval: true pauses the run before it
// (Result.WaitingAt); Run again with Config.Answer to go on. A conflict
// with another writer of the thread aborts the step without committing
// anything. Secrets (the defaults of package redact, the
// secrets: of the pipeline and its agent files, the API key values) are
// redacted before anything is stored, shown or written. Errors in the
// file are *agentfile.FileError naming the file and the line.
package pipeline
