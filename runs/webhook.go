package runs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// checkWebhook reads a run's webhook: an absolute http or https URL
// without credentials, or a path on Config.BaseURL, which
// Config.WebhookCheck (if set) allows, to a public address unless
// Config.WebhookPrivate allows private ones (or it is Config.BaseURL's).
func (s *Service) checkWebhook(ctx context.Context, raw json.RawMessage) (string, error) {
	if IsNull(raw) {
		return "", nil
	}
	var u string
	if json.Unmarshal(raw, &u) != nil {
		return "", invalid("$.webhook", "want a URL (a string)")
	}
	raw0 := u
	p, err := url.Parse(u)
	path := err == nil && p.Scheme == "" && p.Host == "" && strings.HasPrefix(p.Path, "/")
	if path && s.cfg.BaseURL != nil {
		p = s.cfg.BaseURL.ResolveReference(p) // a path: the server's own route
		u = p.String()
	}
	switch {
	case err != nil:
		return "", invalid("$.webhook", "%v", err)
	case p.Scheme != "http" && p.Scheme != "https", p.Host == "":
		return "", invalid("$.webhook", "%q: want an absolute http or https URL%s", u, s.relativeHint())
	case p.User != nil:
		return "", invalid("$.webhook", "a webhook URL carries no credentials")
	}
	if err := s.cfg.WebhookPolicy.check(raw0, p, path); err != nil {
		return "", invalid("$.webhook", "%v", err)
	}
	if s.cfg.WebhookCheck != nil {
		if err := s.cfg.WebhookCheck(p); err != nil {
			return "", invalid("$.webhook", "%v", err)
		}
	}
	if err := s.checkWebhookHost(ctx, p); err != nil {
		return "", invalid("$.webhook", "%v", err)
	}
	return u, nil
}

// relativeHint says why a path is not a webhook here.
func (s *Service) relativeHint() string {
	if s.cfg.BaseURL == nil {
		return " (a path is a route of the server itself only where the program that serves the API names its own address: server.Config.BaseURL)"
	}
	return ""
}

// webhookBody is what a run's webhook receives, as LangGraph's server
// posts it: the run as the API shows it, with its status (success,
// error, interrupted, timeout …), run_started_at, run_ended_at,
// webhook_sent_at (when the body was made: a retry sends the same
// body), values (the thread's state at the end, with __interrupt__ at a
// pause) and, for a run that failed, error (its message). The
// operator's payload_fields (WebhookPolicy.PayloadFields) keeps only
// the fields it names; the body is redacted as everything shown is.
func (m *runManager) webhookBody(ctx context.Context, lr *Run) ([]byte, error) {
	rec := lr.Record()
	v, err := RunViewOf(rec)
	if err != nil {
		return nil, err
	}
	values, err := m.webhookValues(ctx, lr)
	if err != nil {
		return nil, err
	}
	view, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	body := map[string]json.RawMessage{}
	if err := json.Unmarshal(view, &body); err != nil {
		return nil, err
	}
	body["run_started_at"] = raw(m.runStartedAt(ctx, lr))
	body["run_ended_at"] = raw(APITime(time.Unix(0, rec.UpdatedAt)))
	body["webhook_sent_at"] = raw(APITime(m.s.cfg.Now()))
	body["values"] = values
	delete(body, "error")
	if rec.Status == StatusError { // LangGraph's: the message (the record's data is written after the body)
		body["error"] = raw(cmp.Or(lr.data.Error, v.Error, "the run failed"))
	}
	if keep := m.s.cfg.WebhookPolicy.PayloadFields; len(keep) > 0 {
		for k := range body {
			if !slices.Contains(keep, k) {
				delete(body, k)
			}
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return m.s.redact.JSON(b), nil
}

// webhookValues is the thread's state when the run ended: join's answer
// (with __interrupt__ at a pause), or for a run that failed the state it
// left (its error is the body's error).
func (m *runManager) webhookValues(ctx context.Context, lr *Run) (json.RawMessage, error) {
	var values bytes.Buffer
	if lr.rec.Status == StatusError {
		if head, err := m.s.store.Load(ctx, store.LoadRequest{Thread: lr.rec.Thread}); err == nil && head.HasState {
			values.Write(head.State.AppendJSON(nil))
		}
	} else if o := lr.Outcome(); o != nil {
		if err := o.Write(&values); err != nil {
			return nil, err
		}
	}
	if values.Len() == 0 {
		values.WriteString("null")
	}
	return values.Bytes(), nil
}

// runStartedAt is when the run started: the time of the first checkpoint
// it committed (nil when it committed none).
func (m *runManager) runStartedAt(ctx context.Context, lr *Run) *string {
	cp, err := m.s.store.Load(ctx, store.LoadRequest{Thread: lr.rec.Thread, Seq: lr.data.FromSeq + 1})
	if err != nil || cp.Meta.RunID != lr.rec.ID {
		return nil
	}
	t := APITime(cp.CreatedAt)
	return &t
}

// postWebhook posts body to u once.
func (s *Service) postWebhook(ctx context.Context, u string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range s.cfg.WebhookPolicy.Headers {
		req.Header.Set(k, v)
	}
	res, err := s.webhookClient(req.URL).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 200))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %s: %s", res.Status, s.redact.String(strings.TrimSpace(string(msg)))) // it may echo a header's secret
	}
	return nil
}
