package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// maxBundleBody is the body limit of POST /threads/import, above the
// server's (Config.MaxBodyBytes), and the largest bundle it reads.
const maxBundleBody = 256 << 20

// bundleRoutes are the thread bundle routes (Cairn extensions;
// docs/bundles.md).
func (s *Server) bundleRoutes() []route {
	return []route{
		{method: "GET", path: "/threads/{thread_id}/bundle", summary: "A thread's whole history as one bundle file (Cairn; cairn import reads it)", handler: s.getBundle},
		{method: "POST", path: "/threads/import", summary: "Create a thread from a bundle (the body; as: the new id) for the caller's tenant (Cairn)", bodyLimit: maxBundleBody, handler: s.importBundle},
	}
}

// getBundle answers with a thread's bundle; a thread of another tenant is
// not found.
func (s *Server) getBundle(w http.ResponseWriter, r *http.Request) error {
	th, err := s.svc.Thread(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	// Written whole before the answer starts, so that a failure is an
	// error status, not a cut bundle.
	var buf bytes.Buffer
	if _, err := store.ExportBundle(r.Context(), s.store, th.ID, &buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", runs.APIThreadID(th.ID)+".cairn"))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// importBundle creates a thread from the bundle in the body, owned by the
// caller's tenant whatever the bundle says; ?as= names it. 201 with the
// thread.
func (s *Server) importBundle(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	as := r.URL.Query().Get("as")
	if as != "" {
		if err := store.ValidateID(as); err != nil {
			return unprocessable("as", "%v", err)
		}
	}
	info, err := store.ImportBundle(ctx, s.store, r.Body, store.ImportOptions{As: as, Tenant: runs.TenantOf(ctx), MaxBytes: maxBundleBody})
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
	}
	if err != nil {
		return err
	}
	th, err := s.svc.Thread(ctx, runs.APIThreadID(info.Thread))
	if err != nil {
		return err
	}
	v, err := s.threadView(ctx, th)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, v)
	return nil
}
