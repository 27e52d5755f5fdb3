package server

import (
	"errors"
	"net/http"

	"github.com/cairn-dev/cairn/server/lgsaver"
	"github.com/cairn-dev/cairn/store"
)

// newSaver is the LangGraph saver protocol over the server's store, with
// the server's tenants and body decoder.
func newSaver(st store.Store) *lgsaver.Saver {
	return lgsaver.New(lgsaver.Config{Store: st, Key: threadKey, ID: apiThreadID, Tenant: tenantOf, Decode: decodeBody})
}

// saverRoutes are the saver's routes as the server's: each gets the
// server's auth, tenant, body limit, timeout, CORS and error body.
func (s *Server) saverRoutes() []route {
	var out []route
	for _, rt := range s.saver.Routes() {
		h := rt.Handler
		out = append(out, route{method: rt.Method, path: rt.Path, summary: rt.Summary, bodyLimit: rt.BodyLimit,
			handler: func(w http.ResponseWriter, r *http.Request) error { return saverError(h(w, r)) }})
	}
	return out
}

// saverError is an error of the saver as the API answers it: a refusal
// with its status and path, anything else as it is.
func saverError(err error) error {
	if e, ok := errors.AsType[*lgsaver.Error](err); ok {
		return &apiError{Status: lgsaver.StatusOf(e), Msg: e.Msg, Path: e.Path}
	}
	return err
}
