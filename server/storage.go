package server

import (
	"errors"
	"net/http"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// threadStorage answers GET /threads/{thread_id}/storage: where the
// thread's stored bytes go — its checkpoints (patches, metadata,
// snapshots), shared out by channel (top-level state field) and by
// namespace, its pending writes, and the runs and run event logs the
// server keeps for it (store.ThreadStorage; docs/server.md). Another
// tenant's thread is not found, as a missing one is; a store that cannot
// measure answers 501, as LangGraph's server does for a custom
// checkpointer.
func (s *Server) threadStorage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	st, err := store.ThreadStorageOf(ctx, s.store, th.ID)
	if errors.Is(err, errors.ErrUnsupported) {
		return &apiError{Status: http.StatusNotImplemented, Msg: "this server's store does not measure threads' storage"}
	}
	if err != nil {
		return err
	}
	st.ThreadID = runs.APIThreadID(st.ThreadID)
	for i := range st.Namespaces {
		st.Namespaces[i].Namespace = runs.APINamespace(st.Namespaces[i].Namespace)
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
