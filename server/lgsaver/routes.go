package lgsaver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/cairn-dev/cairn/store"
)

// Config is what a Saver needs of the server that mounts it.
type Config struct {
	// Store keeps the checkpoints (required).
	Store store.Store
	// Key is the store's key of the thread a request names by id (the
	// request's tenant's thread); nil: the id itself.
	Key func(ctx context.Context, id string) string
	// ID is the id a request names the thread the store keeps under key
	// by (Key's inverse); nil: the key itself.
	ID func(key string) string
	// Tenant is the request's tenant: the threads the saver creates are
	// its, and another tenant's thread is not found; nil: "".
	Tenant func(ctx context.Context) string
	// Decode reads a request's JSON body into v, a pointer to a request
	// struct; nil: encoding/json, unknown fields refused. The server's
	// decoder says where a body is wrong and bounds its size.
	Decode func(r *http.Request, v any) error
}

// Saver serves the LangGraph saver protocol over a store. It is safe for
// concurrent use; several Savers (in several processes) may serve one
// store.
type Saver struct {
	store  store.Store
	key    func(ctx context.Context, id string) string
	id     func(key string) string
	tenant func(ctx context.Context) string
	decode func(r *http.Request, v any) error
	ext    store.ExternalIDs // nil: the store keeps no index of external ids
	index  lgIndex           // the heads (and walked ids) this process has seen
}

// New returns a Saver over cfg.Store.
func New(cfg Config) *Saver {
	s := &Saver{store: cfg.Store, key: cfg.Key, id: cfg.ID, tenant: cfg.Tenant, decode: cfg.Decode}
	if s.key == nil {
		s.key = func(_ context.Context, id string) string { return id }
	}
	if s.id == nil {
		s.id = func(key string) string { return key }
	}
	if s.tenant == nil {
		s.tenant = func(context.Context) string { return "" }
	}
	if s.decode == nil {
		s.decode = decodeJSON
	}
	if x, err := store.ExternalIDsOf(cfg.Store); err == nil {
		s.ext = x
	}
	return s
}

// Route is one endpoint of the protocol. Handler writes a JSON answer
// and returns nil, or writes nothing and returns the error the server
// answers (an *Error, or the store's).
type Route struct {
	Method, Path, Summary string
	// BodyLimit is the body size the route needs (a checkpoint whose
	// list channel changed other than by appending carries the whole
	// list); 0: the server's.
	BodyLimit int64
	Handler   func(w http.ResponseWriter, r *http.Request) error
}

// Routes are the endpoints of the protocol, under /checkpointer/.
func (s *Saver) Routes() []Route {
	return []Route{
		{Method: "POST", Path: "/checkpointer/put", Summary: "Store a LangGraph checkpoint (Cairn checkpointer)", BodyLimit: lgBodyLimit, Handler: s.putCheckpoint},
		{Method: "POST", Path: "/checkpointer/writes", Summary: "Store a LangGraph checkpoint's pending writes (Cairn checkpointer)", BodyLimit: lgBodyLimit, Handler: s.putWrites},
		{Method: "POST", Path: "/checkpointer/get", Summary: "A LangGraph checkpoint, or a namespace's newest (Cairn checkpointer)", Handler: s.getCheckpoint},
		{Method: "POST", Path: "/checkpointer/list", Summary: "List LangGraph checkpoints (filter, before, limit) (Cairn checkpointer)", Handler: s.listCheckpoints},
		{Method: "POST", Path: "/checkpointer/batch", Summary: "Listed LangGraph checkpoints with their state (Cairn checkpointer)", Handler: s.batchCheckpoints},
		{Method: "DELETE", Path: "/checkpointer/threads/{thread_id}", Summary: "Delete a thread's checkpoints (Cairn checkpointer)", Handler: s.deleteCheckpoints},
		{Method: "POST", Path: "/checkpointer/threads/{thread_id}/copy", Summary: "Copy a thread's checkpoints to a new thread id (Cairn checkpointer)", Handler: s.copyCheckpoints},
		{Method: "POST", Path: "/checkpointer/prune", Summary: "Keep the newest checkpoints of threads, or delete them (Cairn checkpointer)", Handler: s.pruneCheckpoints},
	}
}

// thread returns a thread of the request's tenant: another tenant's is
// not found, as a missing one is.
func (s *Saver) thread(ctx context.Context, id string) (store.Thread, error) {
	if err := store.ValidateID(id); err != nil {
		return store.Thread{}, unprocessable("thread_id", "%v", err)
	}
	th, err := s.store.Thread(ctx, s.key(ctx, id))
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Tenant != s.tenant(ctx)) {
		return store.Thread{}, notFound("thread %q not found", id)
	}
	return th, err
}

// decodeJSON is the decoder of a Saver without Config.Decode.
func decodeJSON(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return unprocessable("$", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return unprocessable("$", "%v", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"detail":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
