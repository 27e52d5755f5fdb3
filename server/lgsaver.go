package server

import (
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server/lgsaver"
	"github.com/cairn-dev/cairn/store"
)

// newSaver is the LangGraph saver protocol over the server's store, with
// the server's tenants and body decoder.
func newSaver(st store.Store) *lgsaver.Saver {
	return lgsaver.New(lgsaver.Config{Store: st, Key: runs.ThreadKey, ID: runs.APIThreadID, Tenant: runs.TenantOf, Decode: decodeBody})
}

// saverRoutes are the saver's routes as the server's: each gets the
// server's auth, tenant, body limit, timeout, CORS and error body (its
// errors' kinds become statuses in statusOf).
func (s *Server) saverRoutes() []route {
	var out []route
	for _, rt := range s.saver.Routes() {
		out = append(out, route{method: rt.Method, path: rt.Path, summary: rt.Summary, bodyLimit: rt.BodyLimit, handler: rt.Handler})
	}
	return out
}
