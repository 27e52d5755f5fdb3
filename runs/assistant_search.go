package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// AssistantSearch selects assistants (POST /assistants/search and
// /count).
type AssistantSearch struct {
	Metadata map[string]any `json:"metadata"`
	GraphID  string         `json:"graph_id"`
	// Name keeps assistants whose name holds it, in any case.
	Name      string   `json:"name"`
	Limit     *int     `json:"limit"`
	Offset    int      `json:"offset"`
	SortBy    string   `json:"sort_by"`
	SortOrder string   `json:"sort_order"`
	Select    []string `json:"select"`
}

// SearchAssistants lists the system assistants and the caller's, newest
// first unless q sorts otherwise, and counts all that match.
func (s *Service) SearchAssistants(ctx context.Context, q AssistantSearch) ([]AssistantRecord, int, error) {
	for _, e := range []error{
		OneOf("$.sort_by", q.SortBy, "assistant_id", "graph_id", "name", "created_at", "updated_at"),
		OneOf("$.sort_order", q.SortOrder, "asc", "desc"),
	} {
		if e != nil {
			return nil, 0, e
		}
	}
	limit := 10
	if q.Limit != nil {
		limit = *q.Limit
	}
	if limit < 0 || q.Offset < 0 {
		return nil, 0, invalid("$.limit", "limit and offset must not be negative")
	}
	stored, err := s.registry.all(ctx, "current")
	if err != nil {
		return nil, 0, err
	}
	for _, id := range s.order {
		stored = append(stored, s.systemRecord(s.assistants[id]))
	}
	var out []AssistantRecord
	for _, a := range stored {
		if (q.GraphID == "" || a.GraphID == q.GraphID) && strings.Contains(strings.ToLower(a.Name), strings.ToLower(q.Name)) && Contains(a.Metadata, q.Metadata) {
			out = append(out, a)
		}
	}
	sortRecords(out, cmp.Or(q.SortBy, "created_at"), cmp.Or(q.SortOrder, "desc"))
	return pageOf(out, limit, q.Offset), len(out), nil
}

// sortRecords sorts by a field, ties by id.
func sortRecords(rs []AssistantRecord, by, order string) {
	key := func(a AssistantRecord) string {
		switch by {
		case "version":
			return versionKey(a.Version)
		case "assistant_id":
			return a.AssistantID
		case "graph_id":
			return a.GraphID
		case "name":
			return a.Name
		case "updated_at":
			return a.UpdatedAt
		}
		return a.CreatedAt
	}
	slices.SortStableFunc(rs, func(a, b AssistantRecord) int {
		c := cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a.AssistantID, b.AssistantID))
		if order == "desc" {
			return -c
		}
		return c
	})
}

func pageOf[T any](all []T, limit, offset int) []T {
	all = all[min(offset, len(all)):]
	return all[:min(limit, len(all))]
}

// Contains reports whether metadata md holds every member of filter,
// objects compared member by member (JSON containment, as LangGraph's
// metadata filters).
func Contains(md, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	norm, want := normalJSON(md), normalJSON(filter)
	return containsJSON(norm, want)
}

func normalJSON(v any) any {
	b, _ := json.Marshal(v) // API metadata always marshals
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func containsJSON(have, want any) bool {
	w, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(have, want)
	}
	h, ok := have.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range w {
		if hv, ok := h[k]; !ok || !containsJSON(hv, v) {
			return false
		}
	}
	return true
}
