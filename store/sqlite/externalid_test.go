package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
	"github.com/cairn-dev/cairn/store/storetest"
)

// TestUpgradeFormat7ExternalIDs: format 8 copies the LangGraph saver's
// checkpoint ids from the rows' metadata into the index.
func TestUpgradeFormat7ExternalIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v7.db")
	s := openAt(t, path)
	storetest.WriteLangGraphRows(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.Downgrade(t, path, 7)
	s = openWith(t, path, sqlite.Options{}, store.Options{})
	if v := sqlitetest.Format(t, path); v != latestFormat {
		t.Fatalf("format %d after opening", v)
	}
	storetest.CheckLangGraphRows(t, s)
}
