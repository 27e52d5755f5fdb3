package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// MaxBatch bounds the runs of one batch (CreateBatch).
const MaxBatch = 1000

// CreateBatch creates stateless background runs, one per request, each
// on a thread of its own (POST /runs/batch, as LangGraph's). Every
// request is checked before any run is made: one that is not valid is an
// error naming its place ("$[2].input") and nothing is created. A run
// that cannot be made after the checks (a store error) ends the batch
// with the error; the runs made before it go on.
func (s *Service) CreateBatch(ctx context.Context, qs []Request) ([]*Run, error) {
	switch {
	case len(qs) == 0:
		return nil, invalid("$", "an empty batch: want a list of runs")
	case len(qs) > MaxBatch:
		return nil, invalid("$", "%d runs: a batch holds %d at most", len(qs), MaxBatch)
	}
	for i := range qs {
		if err := s.checkStateless(ctx, &qs[i]); err != nil {
			return nil, batchError(i, err)
		}
	}
	out := make([]*Run, 0, len(qs))
	for i, q := range qs {
		lr, err := s.Create(ctx, "", q)
		if err != nil {
			return out, batchError(i, err)
		}
		out = append(out, lr)
	}
	return out, nil
}

// checkStateless checks a stateless run's request as Create does before
// it makes anything.
func (s *Service) checkStateless(ctx context.Context, q *Request) error {
	a, k, _, err := q.check(ctx, s)
	if err != nil {
		return err
	}
	if c := k.Command; c != nil && !IsNull(c.Update) {
		return s.checkUpdatable(ctx, "")
	}
	return checkInput(a, k.Input)
}

// batchError places an invalid request's error at its index in the batch.
func batchError(i int, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalidInput {
		path := fmt.Sprintf("$[%d]", i)
		if rest, ok := strings.CutPrefix(e.Path, "$"); ok {
			path += rest
		}
		return &Error{Kind: e.Kind, Path: path, Msg: e.Msg}
	}
	return fmt.Errorf("run %d of the batch: %w", i, err)
}
