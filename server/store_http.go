package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// The long-term memory store's API (LangGraph's /store routes, as the
// official SDKs call them), scoped to the request's tenant.

// apiItem is an item as LangGraph's API shows one.
type apiItem struct {
	Namespace []string       `json:"namespace"`
	Key       string         `json:"key"`
	Value     map[string]any `json:"value"`
	CreatedAt string         `json:"created_at"`
	UpdatedAt string         `json:"updated_at"`
}

// apiSearchItem is a search hit: an item and its score (null without a
// query).
type apiSearchItem struct {
	apiItem
	Score *float64 `json:"score"`
}

func itemView(it store.Item) apiItem {
	return apiItem{Namespace: it.Namespace, Key: it.Key, Value: it.Value, CreatedAt: runs.APITime(it.CreatedAt), UpdatedAt: runs.APITime(it.UpdatedAt)}
}

// items is the server's item store: Config.Items, or its store's items.
func (s *Server) items() (store.ItemStore, error) {
	if s.cfg.Items != nil {
		return s.cfg.Items, nil
	}
	is, err := store.ItemsOf(s.store)
	if err != nil {
		return nil, &apiError{Status: http.StatusNotImplemented, Msg: "this server's store keeps no items"}
	}
	return is, nil
}

// itemRequest reads a /store request's body into its operation, for the
// tenant of the request, with the item store it goes to.
func itemRequest[Op any](s *Server, r *http.Request, decode func([]byte, string) (Op, error)) (store.ItemStore, Op, error) {
	var op Op
	is, err := s.items()
	if err != nil {
		return nil, op, err
	}
	body, err := readBody(r)
	if err != nil {
		return nil, op, err
	}
	op, err = decode(body, runs.TenantOf(r.Context()))
	return is, op, err
}

// itemIndex is a put's index: false, null or an array of field paths.
type itemIndex struct {
	set    bool
	off    bool
	fields []string
}

func (x *itemIndex) UnmarshalJSON(b []byte) error {
	switch strings.TrimSpace(string(b)) {
	case "null":
		return nil
	case "false":
		x.set, x.off = true, true
		return nil
	}
	if err := json.Unmarshal(b, &x.fields); err != nil || x.fields == nil {
		return &fieldError{path: "$.index", msg: "want false, null or an array of field paths"}
	}
	x.set = true
	return nil
}

type putItemRequest struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Index     itemIndex       `json:"index"`
	TTL       *float64        `json:"ttl"`
}

// decodePutItem reads a put's body into an operation the store accepts,
// or a 422 saying where it is wrong.
func decodePutItem(body []byte, tenant string) (store.PutOp, error) {
	var req putItemRequest
	if err := decodeJSON(body, &req); err != nil {
		return store.PutOp{}, err
	}
	if err := checkItemName(req.Namespace, req.Key); err != nil {
		return store.PutOp{}, err
	}
	v, err := jsonObject(req.Value, "$.value", false)
	if err != nil {
		return store.PutOp{}, err
	}
	op := store.PutOp{Tenant: tenant, Namespace: req.Namespace, Key: req.Key, Value: v, NoIndex: req.Index.off}
	if req.Index.set && !req.Index.off {
		op.Index = req.Index.fields
		for i, f := range op.Index {
			if err := store.ParseFieldPath(f); err != nil {
				return store.PutOp{}, unprocessable(fmt.Sprintf("$.index[%d]", i), "%q: a field path is a name, names joined by . with [N], [-N] or [*] after them, or $", f)
			}
		}
	}
	if req.TTL != nil {
		if op.TTL, err = ttlOf(*req.TTL); err != nil {
			return store.PutOp{}, err
		}
	}
	return op, nil
}

// ttlOf reads a TTL in minutes.
func ttlOf(minutes float64) (time.Duration, error) {
	d := minutes * float64(time.Minute)
	if !(minutes > 0) || d >= math.MaxInt64 || time.Duration(d) <= 0 {
		return 0, unprocessable("$.ttl", "%g: want a positive number of minutes, or null for none", minutes)
	}
	return time.Duration(d), nil
}

// checkItemName checks a namespace and key where the request names them.
func checkItemName(ns []string, key string) error {
	if err := store.ValidateItemNamespace(ns, "namespace"); err != nil {
		return unprocessable("$.namespace", "%v", err)
	}
	if err := store.ValidateItemKey(key); err != nil {
		return unprocessable("$.key", "%v", err)
	}
	return nil
}

// jsonObject decodes a JSON object keeping its numbers exact; a missing or
// null one is an error unless optional.
func jsonObject(raw json.RawMessage, path string, optional bool) (map[string]any, error) {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		if optional {
			return nil, nil
		}
		return nil, unprocessable(path, "want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, unprocessable(path, "want a JSON object")
	}
	return m, nil
}

// putItem stores an item, its value redacted by the server's redactor
// first (as a run's input is).
func (s *Server) putItem(w http.ResponseWriter, r *http.Request) error {
	is, op, err := itemRequest(s, r, decodePutItem)
	if err != nil {
		return err
	}
	if m, ok := s.redact.Value(op.Value).(map[string]any); ok {
		op.Value = m
	}
	if err := is.Put(r.Context(), op); err != nil {
		return itemErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// itemErr gives a store error its status: a failing embedder is a 502.
func itemErr(err error) error {
	if errors.Is(err, store.ErrEmbedding) {
		return &apiError{Status: http.StatusBadGateway, Msg: err.Error()}
	}
	var fe *store.FilterError
	if errors.As(err, &fe) {
		return unprocessable("$.filter."+fe.Path, "%s", fe.Msg)
	}
	return err
}

// getItem answers the item, or null when there is none (as LangGraph's
// server does).
func (s *Server) getItem(w http.ResponseWriter, r *http.Request) error {
	is, err := s.items()
	if err != nil {
		return err
	}
	qs := r.URL.Query()
	ns := strings.Split(qs.Get("namespace"), ".")
	if err := store.ValidateItemNamespace(ns, "namespace"); err != nil {
		return unprocessable("namespace", "%q (labels joined by periods): %v", qs.Get("namespace"), err)
	}
	op := store.GetOp{Tenant: runs.TenantOf(r.Context()), Namespace: ns, Key: qs.Get("key")}
	if err := store.ValidateItemKey(op.Key); err != nil {
		return unprocessable("key", "%v", err)
	}
	if v := qs.Get("refresh_ttl"); v != "" {
		refresh, err := strconv.ParseBool(v)
		if err != nil {
			return unprocessable("refresh_ttl", "%q: want true or false", v)
		}
		op.NoRefresh = !refresh
	}
	it, err := is.Get(r.Context(), op)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	if err != nil {
		return itemErr(err)
	}
	writeJSON(w, http.StatusOK, itemView(it))
	return nil
}

type deleteItemRequest struct {
	Namespace []string `json:"namespace"`
	Key       string   `json:"key"`
}

func decodeDeleteItem(body []byte, tenant string) (store.DeleteOp, error) {
	var req deleteItemRequest
	if err := decodeJSON(body, &req); err != nil {
		return store.DeleteOp{}, err
	}
	if err := checkItemName(req.Namespace, req.Key); err != nil {
		return store.DeleteOp{}, err
	}
	return store.DeleteOp{Tenant: tenant, Namespace: req.Namespace, Key: req.Key}, nil
}

func (s *Server) deleteItem(w http.ResponseWriter, r *http.Request) error {
	is, op, err := itemRequest(s, r, decodeDeleteItem)
	if err != nil {
		return err
	}
	if err := is.Delete(r.Context(), op); err != nil {
		return itemErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type searchItemsRequest struct {
	NamespacePrefix []string        `json:"namespace_prefix"`
	Filter          json.RawMessage `json:"filter"`
	Limit           *int            `json:"limit"`
	Offset          *int            `json:"offset"`
	Query           *string         `json:"query"`
	RefreshTTL      *bool           `json:"refresh_ttl"`
}

// maxPage caps the items or namespaces one request lists.
const maxPage = 1000

// page reads a limit (0 or null: def) and an offset.
func page(limit, offset *int, def int) (int, int, error) {
	l, o := def, 0
	if limit != nil && *limit != 0 {
		l = *limit
	}
	if offset != nil {
		o = *offset
	}
	if l < 1 || l > maxPage {
		return 0, 0, unprocessable("$.limit", "%d: want 1 to %d", l, maxPage)
	}
	if o < 0 {
		return 0, 0, unprocessable("$.offset", "%d: must not be negative", o)
	}
	return l, o, nil
}

func decodeSearchItems(body []byte, tenant string) (store.SearchOp, error) {
	var req searchItemsRequest
	if err := decodeJSON(body, &req); err != nil {
		return store.SearchOp{}, err
	}
	op := store.SearchOp{Tenant: tenant, Prefix: req.NamespacePrefix}
	if err := store.ValidateItemLabels(op.Prefix, "namespace_prefix"); err != nil {
		return store.SearchOp{}, unprocessable("$.namespace_prefix", "%v", err)
	}
	f, err := jsonObject(req.Filter, "$.filter", true)
	if err != nil {
		return store.SearchOp{}, err
	}
	if _, err := store.CompileFilter(f); err != nil {
		return store.SearchOp{}, itemErr(err)
	}
	op.Filter = f
	if op.Limit, op.Offset, err = page(req.Limit, req.Offset, 10); err != nil {
		return store.SearchOp{}, err
	}
	if req.Query != nil {
		op.Query = *req.Query
	}
	op.NoRefresh = req.RefreshTTL != nil && !*req.RefreshTTL
	return op, nil
}

func (s *Server) searchItems(w http.ResponseWriter, r *http.Request) error {
	is, op, err := itemRequest(s, r, decodeSearchItems)
	if err != nil {
		return err
	}
	found, err := is.Search(r.Context(), op)
	if err != nil {
		return itemErr(err)
	}
	out := make([]apiSearchItem, len(found))
	for i, it := range found {
		out[i] = apiSearchItem{apiItem: itemView(it), Score: it.Score}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": out})
	return nil
}

type listNamespacesRequest struct {
	Prefix   []string `json:"prefix"`
	Suffix   []string `json:"suffix"`
	MaxDepth *int     `json:"max_depth"`
	Limit    *int     `json:"limit"`
	Offset   *int     `json:"offset"`
}

func decodeListNamespaces(body []byte, tenant string) (store.ListNamespacesOp, error) {
	var req listNamespacesRequest
	if err := decodeJSON(body, &req); err != nil {
		return store.ListNamespacesOp{}, err
	}
	op := store.ListNamespacesOp{Tenant: tenant, Prefix: req.Prefix, Suffix: req.Suffix}
	for _, p := range []struct {
		path   string
		labels []string
	}{{"$.prefix", req.Prefix}, {"$.suffix", req.Suffix}} {
		if err := store.ValidateItemLabels(p.labels, p.path[2:]); err != nil {
			return store.ListNamespacesOp{}, unprocessable(p.path, "%v", err)
		}
	}
	if req.MaxDepth != nil {
		if *req.MaxDepth < 1 {
			return store.ListNamespacesOp{}, unprocessable("$.max_depth", "%d: want at least 1, or null for no limit", *req.MaxDepth)
		}
		op.MaxDepth = *req.MaxDepth
	}
	var err error
	op.Limit, op.Offset, err = page(req.Limit, req.Offset, 100)
	return op, err
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	is, op, err := itemRequest(s, r, decodeListNamespaces)
	if err != nil {
		return err
	}
	nss, err := is.ListNamespaces(r.Context(), op)
	if err != nil {
		return itemErr(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nss})
	return nil
}
