package server

import (
	"net/http"

	"github.com/cairn-dev/cairn/runs"
)

// createCron makes a cron: stateless (POST /runs/crons) or on the
// thread of the path (POST /threads/{thread_id}/runs/crons).
func (s *Server) createCron(w http.ResponseWriter, r *http.Request) error {
	var q runs.CronCreate
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	c, err := s.svc.CreateCron(r.Context(), r.PathValue("thread_id"), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) searchCrons(w http.ResponseWriter, r *http.Request) error {
	var q runs.CronSearch
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	if q.Limit == nil {
		q.Limit = new(10)
	}
	out, total, err := s.svc.SearchCrons(r.Context(), q)
	if err != nil {
		return err
	}
	writePage(w, out, q.Select, q.Offset, total)
	return nil
}

func (s *Server) countCrons(w http.ResponseWriter, r *http.Request) error {
	var q runs.CronSearch
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	q.Limit, q.Offset = new(0), 0
	_, total, err := s.svc.SearchCrons(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, total)
	return nil
}

func (s *Server) getCron(w http.ResponseWriter, r *http.Request) error {
	c, err := s.svc.GetCron(r.Context(), r.PathValue("cron_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) patchCron(w http.ResponseWriter, r *http.Request) error {
	var p runs.CronPatch
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	c, err := s.svc.PatchCron(r.Context(), r.PathValue("cron_id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteCron(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.DeleteCron(r.Context(), r.PathValue("cron_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
