package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// checkWebhook reads a run's webhook: an absolute http or https URL
// without credentials, or a path on Config.BaseURL, which
// Config.WebhookCheck (if set) allows, to a public address unless
// Config.WebhookPrivate allows private ones (or it is Config.BaseURL's).
func (s *Service) checkWebhook(ctx context.Context, raw json.RawMessage) (string, error) {
	if isNull(raw) {
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

// webhookBody is what a run's webhook receives.
func (m *runManager) webhookBody(lr *Run) ([]byte, error) {
	v, err := RunViewOf(lr.Record())
	if err != nil {
		return nil, err
	}
	var values bytes.Buffer
	if o := lr.Outcome(); o != nil {
		if err := o.Write(&values); err != nil {
			return nil, err
		}
	}
	if values.Len() == 0 {
		values.WriteString("null")
	}
	b, err := json.Marshal(struct {
		RunView
		Values json.RawMessage `json:"values"`
	}{v, values.Bytes()})
	if err != nil {
		return nil, err
	}
	return m.s.redact.JSON(b), nil
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
