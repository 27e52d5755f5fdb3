package server

// LangGraph's thread-centric streaming protocol ("v2"), which the newest
// front-end hooks (@langchain/react's useStream) speak: commands to a
// thread (POST /threads/{id}/commands) and the thread's events across its
// runs (POST /threads/{id}/stream/events as SSE; GET as a WebSocket).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/google/uuid"
)

// v2Command is the protocol's command envelope.
type v2Command struct {
	ID     *int64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// v2Reply answers a command: {type: "success", id, result, meta} or
// {type: "error", id, error, message}.
type v2Reply struct {
	Type    string         `json:"type"`
	ID      *int64         `json:"id"`
	Result  any            `json:"result,omitempty"`
	Error   string         `json:"error,omitempty"`
	Message string         `json:"message,omitempty"`
	Meta    map[string]any `json:"meta,omitempty"`
}

// v2Error is a command's failure with the protocol's error code.
type v2Error struct {
	code, msg string
}

func (e *v2Error) Error() string { return e.msg }

func v2Errorf(code, format string, args ...any) error {
	return &v2Error{code: code, msg: fmt.Sprintf(format, args...)}
}

// checkV2Command reads a command's envelope: an integer id, a method and
// params that are an object (or none).
func checkV2Command(body []byte) (v2Command, error) {
	var c v2Command
	var fields map[string]json.RawMessage // the envelope may carry more (the protocol's Extensible)
	if len(bytes.TrimSpace(body)) == 0 {
		return c, unprocessable("$", "want a command: {id, method, params}")
	}
	if err := decodeJSON(body, &fields); err != nil {
		return c, err
	}
	if err := decodeJSON(pick(fields, "id", "method", "params"), &c); err != nil {
		return c, err
	}
	switch {
	case c.ID == nil:
		return c, unprocessable("$.id", "a command needs an integer id")
	case *c.ID < 0:
		return c, unprocessable("$.id", "%d: want 0 or more", *c.ID)
	case c.Method == "":
		return c, unprocessable("$.method", "a command needs a method")
	}
	if p := bytes.TrimSpace(c.Params); !runs.IsNull(p) && p[0] != '{' {
		return c, unprocessable("$.params", "want an object")
	}
	return c, nil
}

// pick is an object of some of fields.
func pick(fields map[string]json.RawMessage, keys ...string) []byte {
	out := map[string]json.RawMessage{}
	for _, k := range keys {
		if v, ok := fields[k]; ok {
			out[k] = v
		}
	}
	b, _ := json.Marshal(out) // raw JSON values always marshal
	return b
}

// postV2Command runs one command on a thread and answers with its reply
// (protocol errors are replies too, with status 200, as the protocol's
// clients read them; a malformed envelope is a 4xx, and so is a thread
// that does not exist, but to run.start, which makes it).
func (s *Server) postV2Command(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	c, err := checkV2Command(body)
	if err != nil {
		return err
	}
	thread := r.PathValue("thread_id")
	if c.Method != "run.start" { // run.start makes the thread; the rest need it
		if _, err := s.svc.Thread(r.Context(), thread); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, s.v2Run(r.Context(), thread, c))
	return nil
}

// v2Run runs a command and makes its reply.
func (s *Server) v2Run(ctx context.Context, thread string, c v2Command) v2Reply {
	result, through, err := s.v2Dispatch(ctx, thread, c)
	if err != nil {
		code, msg := s.v2ErrorOf(err)
		return v2Reply{Type: "error", ID: c.ID, Error: code, Message: msg}
	}
	if result == nil {
		result = map[string]any{}
	}
	meta := map[string]any{"thread_id": thread}
	if through > 0 {
		meta["applied_through_seq"] = through
	}
	return v2Reply{Type: "success", ID: c.ID, Result: result, Meta: meta}
}

// v2ErrorOf is the protocol's code and message for a command's error.
func (s *Server) v2ErrorOf(err error) (string, string) {
	if ve, ok := errors.AsType[*v2Error](err); ok {
		return ve.code, ve.msg
	}
	msg := err.Error()
	if re, ok := errors.AsType[*runs.Error](err); ok && re.Path != "" {
		msg = re.Path + ": " + re.Msg
	} else if ae, ok := errors.AsType[*apiError](err); ok && ae.Path != "" {
		msg = ae.Path + ": " + ae.Msg
	}
	switch code := statusOf(err); {
	case code == http.StatusForbidden || code == http.StatusUnauthorized:
		return "permission_denied", msg
	case code < 500:
		return "invalid_argument", msg
	default:
		s.log.Error("protocol command failed", "err", s.redact.Error(err))
		return "unknown_error", "internal error"
	}
}

// v2Dispatch runs a command: its result, and the seq its effect is
// applied through (0: none).
func (s *Server) v2Dispatch(ctx context.Context, thread string, c v2Command) (any, int64, error) {
	switch c.Method {
	case "run.start":
		return s.v2Start(ctx, thread, c.Params)
	case "input.respond":
		return s.v2Respond(ctx, thread, c.Params)
	case "input.inject":
		return s.v2Inject(ctx, thread, c.Params)
	case "state.get":
		v, err := s.v2State(ctx, thread, c.Params)
		return v, 0, err
	case "state.listCheckpoints":
		v, err := s.v2Checkpoints(ctx, thread, c.Params)
		return v, 0, err
	case "state.fork":
		return s.v2Fork(ctx, thread, c.Params)
	case "agent.getTree":
		v, err := s.v2Tree(ctx, thread)
		return v, 0, err
	case "subscription.subscribe":
		// Over HTTP each event stream carries its own filter; the id only
		// names the subscription to unsubscribe.
		if _, err := checkV2Filter(c.Params, false); err != nil {
			return nil, 0, err
		}
		return map[string]any{"subscription_id": uuid.NewString()}, 0, nil
	case "subscription.unsubscribe":
		return map[string]any{}, 0, nil
	case "subscription.reconnect":
		// A client resumes a stream by since, or subscribes again.
		return nil, 0, v2Errorf("not_supported", "subscription.reconnect: resume an event stream with since, or subscribe again")
	}
	return nil, 0, v2Errorf("unknown_command", "unknown command %q", c.Method)
}

// v2Filter is what an event stream or a subscription asks for.
type v2Filter struct {
	Channels   []string   `json:"channels"`
	Namespaces [][]string `json:"namespaces"`
	Depth      *int       `json:"depth"`
	Since      *int64     `json:"since"`
}

// v2Channels are the channels an event may be on.
var v2Channels = []string{"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"}

// checkV2Filter reads a filter (since: the event stream's, which a
// subscription has not).
func checkV2Filter(raw json.RawMessage, since bool) (v2Filter, error) {
	var f v2Filter
	if err := decodeJSON(raw, &f); err != nil {
		return f, err
	}
	if len(f.Channels) == 0 {
		return f, unprocessable("$.channels", "name one channel or more (%s, custom:<name>)", strings.Join(v2Channels, ", "))
	}
	for i, ch := range f.Channels {
		if !isV2Channel(ch) {
			return f, unprocessable(fmt.Sprintf("$.channels[%d]", i), "%q: want one of %s or custom:<name>", ch, strings.Join(v2Channels, ", "))
		}
	}
	if f.Depth != nil && *f.Depth < 0 {
		return f, unprocessable("$.depth", "%d: want 0 or more", *f.Depth)
	}
	if f.Since != nil && (!since || *f.Since < 0) {
		if !since {
			return f, unprocessable("$.since", "a subscription takes no since")
		}
		return f, unprocessable("$.since", "%d: want 0 or more", *f.Since)
	}
	return f, nil
}

func isV2Channel(ch string) bool {
	return slices.Contains(v2Channels, ch) || strings.HasPrefix(ch, "custom:") && len(ch) > len("custom:")
}

// matches reports whether an event is one the filter asks for.
func (f *v2Filter) matches(ev *runs.V2Event) bool {
	ch := ev.Channel()
	if !slices.ContainsFunc(f.Channels, func(c string) bool { return c == ch || ch == "custom" && c == "custom:"+customName(ev) }) {
		return false
	}
	ns := ev.Params.Namespace
	return len(f.Namespaces) == 0 || slices.ContainsFunc(f.Namespaces, func(p []string) bool {
		return len(p) <= len(ns) && slices.Equal(ns[:len(p)], p) && (f.Depth == nil || len(ns)-len(p) <= *f.Depth)
	})
}

// wants reports whether the filter names a channel.
func (f *v2Filter) wants(channel string) bool {
	return slices.Contains(f.Channels, channel)
}

// customName is a custom event's name.
func customName(ev *runs.V2Event) string {
	if m, ok := ev.Params.Data.(map[string]any); ok {
		if n, ok := m["name"].(string); ok {
			return n
		}
	}
	return ""
}

// postV2Events streams a thread's events (SSE) that the filter in the
// body asks for, across its runs, until the client leaves: from the
// thread's newest run, or after the event numbered since.
func (s *Server) postV2Events(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	f, err := checkV2Filter(body, true)
	if err != nil {
		return err
	}
	ctx := r.Context()
	thread := r.PathValue("thread_id")
	if _, err := s.svc.Thread(ctx, thread); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flush(w)
	var mu sync.Mutex
	stop := s.heartbeat(ctx, w, &mu)
	defer stop()
	var since int64
	if f.Since != nil {
		since = *f.Since
	}
	err = s.svc.V2Stream(ctx, thread, since, f.wants("values"), func(evs []runs.V2Event) error {
		mu.Lock()
		defer mu.Unlock()
		for i := range evs {
			if f.matches(&evs[i]) {
				writeV2SSE(w, &evs[i])
			}
		}
		flush(w)
		return nil
	})
	if err != nil && ctx.Err() == nil {
		mu.Lock()
		defer mu.Unlock()
		code, msg := s.v2ErrorOf(err)
		b, _ := json.Marshal(v2Reply{Type: "error", Error: code, Message: msg}) // strings always marshal
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
		flush(w)
	}
	return nil
}

// heartbeat writes a comment line every Config.Heartbeat while the
// stream is open, so that a client sees a quiet stream is alive.
func (s *Server) heartbeat(ctx context.Context, w http.ResponseWriter, mu *sync.Mutex) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(s.cfg.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				mu.Lock()
				_, _ = w.Write([]byte(": heartbeat\n\n"))
				flush(w)
				mu.Unlock()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// writeV2SSE writes one protocol event.
func writeV2SSE(w http.ResponseWriter, ev *runs.V2Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.EventID, ev.Method, b)
}
