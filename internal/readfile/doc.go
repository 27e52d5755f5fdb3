// Package readfile reads the files users name — agent files, pipeline
// files, schemas, scripts, inputs: regular files only, up to a size limit,
// so that a path to a device, a FIFO or a huge file gets a clear error
// instead of a hang or an exhausted memory.
package readfile
