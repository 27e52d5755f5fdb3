// Package sqlitetest turns a SQLite store back into the formats of older
// Cairn releases, for the tests of the upgrades that bring it forward.
package sqlitetest
