// Package pgtest gives tests a private PostgreSQL schema on the server named
// by CAIRN_TEST_POSTGRES: tests that need Postgres skip without it and fail
// when it is set but unreachable.
package pgtest
