package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// apiClient speaks the LangGraph API over one keep-alive connection, as a
// chat front end does, and counts the connections it had to open.
type apiClient struct {
	hc    *http.Client
	base  string
	conns atomic.Int64
	buf   bytes.Buffer // the last response's body
	// trailer is the last response's trailer (a wait's Server-Timing).
	trailer http.Header
}

func newAPIClient(base string) *apiClient {
	c := &apiClient{base: strings.TrimRight(base, "/")}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.conns.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Hour,
		DisableCompression:  true,
	}
	c.hc = &http.Client{Transport: tr}
	return c
}

func (c *apiClient) close() { c.hc.CloseIdleConnections() }

// HTTPError is an answer other than 2xx.
type HTTPError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Body)
}

// do sends a request and reads the whole answer into c.buf; an answer
// other than 2xx is an *HTTPError.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(res.Body); err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	c.trailer = res.Trailer
	if res.StatusCode/100 != 2 {
		return &HTTPError{Method: method, Path: path, Status: res.StatusCode, Body: truncate(c.buf.String(), 500)}
	}
	return nil
}

// call sends body (JSON-encoded unless nil) and decodes a 2xx answer into
// out (unless nil).
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	if err := c.do(ctx, method, path, b); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(c.buf.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w: %s", method, path, err, truncate(c.buf.String(), 300))
	}
	return nil
}

// getJSON decodes the answer of a GET of url into out.
func getJSON(ctx context.Context, hc *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 500))
		return &HTTPError{Method: http.MethodGet, Path: url, Status: res.StatusCode, Body: string(b)}
	}
	return json.NewDecoder(res.Body).Decode(out)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
