package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// replayRequest is the body of POST /threads/{thread_id}/replay.
type replayRequest struct {
	From int64  `json:"from"`
	NS   string `json:"ns"`
	Into string `json:"into"`
}

// replayThread replays a thread of the request's tenant with its
// assistant as the server has it now (package replay) and answers the
// report: 200 whether it matched or departed. The thread replayed is
// never written to; into names a new thread of the same tenant.
func (s *Server) replayThread(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	var req replayRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.From < 0 {
		return unprocessable("$.from", "%d: a checkpoint seq is 1 or more", req.From)
	}
	opts := replay.Options{Namespace: req.NS, From: req.From}
	if req.Into != "" {
		if err := store.ValidateID(req.Into); err != nil {
			return unprocessable("$.into", "%v", err)
		}
		if opts.Into = runs.ThreadKey(ctx, req.Into); opts.Into == th.ID {
			return unprocessable("$.into", "%q is the thread replayed: replay never writes to it", req.Into)
		}
	}
	if opts.Assistant, err = s.svc.ThreadAssistant(ctx, th); err != nil {
		return err
	}
	rep, err := replay.Thread(ctx, s.store, th.ID, opts)
	switch {
	case errors.Is(err, store.ErrConflict):
		return conflict("thread %q exists: replay writes into a new thread", req.Into)
	case errors.Is(err, store.ErrInvalidArgument):
		return unprocessable("$", "%s", runs.APIText(th.ID, err.Error()))
	case err != nil:
		return err
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	// The report speaks of the tenant's threads by the ids it knows them by.
	b = []byte(runs.APIText(th.ID, string(b)))
	if opts.Into != "" {
		b = []byte(runs.APIText(opts.Into, string(b)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}
