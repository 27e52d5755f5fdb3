package storetest

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// WriteLangGraphRows writes thread "lg" as the LangGraph saver wrote it
// before format 8: two checkpoints whose ids ("a", "b") are only in their
// metadata, and one without an id. A store taken back to format 7 and
// upgraded finds them with CheckLangGraphRows.
func WriteLangGraphRows(t testing.TB, s store.Store) {
	t.Helper()
	ctx := context.Background()
	for i, id := range []string{"a", "b", ""} {
		m := store.Meta{}
		if id != "" {
			m.Extra = map[string]any{"langgraph": map[string]any{"checkpoint": map[string]any{"id": id, "v": 4}}}
		}
		if _, err := s.Append(ctx, store.Checkpoint{Thread: "lg", Parent: int64(i), Patch: state.Patch{}, State: state.EmptyDoc(), Meta: m}); err != nil {
			t.Fatal(err)
		}
	}
}

// CheckLangGraphRows checks that the rows WriteLangGraphRows wrote are
// found by their ids.
func CheckLangGraphRows(t testing.TB, s store.Store) {
	t.Helper()
	x, err := store.ExternalIDsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	for id, seq := range map[string]int64{"a": 1, "b": 2} {
		if cp, err := x.ByExternalID(context.Background(), "lg", "", id); err != nil || cp.Seq != seq || cp.ExternalID != id {
			t.Fatalf("external id %q after the upgrade: %+v, %v", id, cp, err)
		}
	}
}
