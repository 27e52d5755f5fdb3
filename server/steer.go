package server

import (
	"encoding/json"
	"net/http"
)

// steerRequest is the body of POST /threads/{thread_id}/steer.
type steerRequest struct {
	// Message is a string (a human message) or a message object.
	Message json.RawMessage `json:"message"`
	// FollowUp waits for the thread's run to end, then starts a new run
	// with the message.
	FollowUp bool `json:"follow_up"`
}

// steer accepts a message for a thread's running run (Cairn): 202 with
// the inbox entry it became.
func (s *Server) steer(w http.ResponseWriter, r *http.Request) error {
	var q steerRequest
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	it, err := s.svc.Steer(r.Context(), r.PathValue("thread_id"), q.Message, q.FollowUp)
	if err != nil {
		return err
	}
	// The entry is accepted; a thread that cannot start a run now (paused
	// at an interrupt) keeps it for the run that goes on (the service
	// logs why).
	_ = s.svc.StartFollowUps(r.Context(), r.PathValue("thread_id"))
	writeJSON(w, http.StatusAccepted, it)
	return nil
}

// threadInbox lists a thread's inbox with each entry's state (Cairn).
func (s *Server) threadInbox(w http.ResponseWriter, r *http.Request) error {
	items, err := s.svc.Inbox(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, items)
	return nil
}
