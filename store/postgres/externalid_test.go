package postgres_test

import (
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/storetest"
)

// TestUpgradeFormat7ExternalIDs: format 8 copies the LangGraph saver's
// checkpoint ids from the rows' metadata into the index.
func TestUpgradeFormat7ExternalIDs(t *testing.T) {
	dsn := schemaDSN(t)
	s := open(t, dsn, store.Options{})
	storetest.WriteLangGraphRows(t, s)
	s.Close()
	pgtest.ToFormat7(t, dsn)
	s = open(t, dsn, store.Options{})
	defer s.Close()
	if v := format(t, dsn); v != 8 {
		t.Fatalf("format %d after opening", v)
	}
	storetest.CheckLangGraphRows(t, s)
}
