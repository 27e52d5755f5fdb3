// Package storeurl opens a store from a URL, the form the CLI, servers and
// configuration files use:
//
//	memory:               in-memory, gone when the process ends
//	sqlite:PATH           a SQLite file (the default is sqlite:.cairn/state.db)
//	sqlite:PATH?durability=strict
//	postgres://user@host:5432/db[?search_path=schema]
//
// PATH may be relative. Unknown schemes and options are errors.
package storeurl
