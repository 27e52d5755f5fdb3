// Package model opens model providers by name, as database/sql opens
// drivers: each provider package registers itself when imported
// (model/openai as "openai-compatible", model/anthropic as "anthropic",
// model/scripted as "scripted"), and agent files, pipelines and the CLI's
// --model resolve names through a Registry. A Go program adds its own
// providers to a registry of its own (Defaults returns a copy of the
// registered ones) and hands it to agent files and pipelines.
//
// Two rules hold for every provider: an API key variable a config names
// must be set and not empty before anything runs (ErrMissingKey), and keys
// are read from the environment only, never kept in a config, an error or
// a thread's metadata.
package model
