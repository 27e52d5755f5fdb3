package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/runs"
)

// v2SocketBuffer bounds the events a socket keeps to replay to a
// subscription made after they were sent.
const v2SocketBuffer = 10000

// v2Socket is one WebSocket of the thread-centric protocol: commands and
// their replies, and the thread's events for the subscriptions made on it
// (each replays what the socket has seen of the thread that it matches).
type v2Socket struct {
	s      *Server
	thread string
	conn   *websocket.Conn
	mu     sync.Mutex // guards writes, subs and seen
	subs   map[string]*v2Filter
	seen   []runs.V2Event
}

// getV2Socket upgrades GET /threads/{id}/stream/events to a WebSocket.
// The thread need not exist yet: a run.start on the socket makes it (a
// request that is no upgrade is a 404 for a thread that does not exist,
// else a 426).
func (s *Server) getV2Socket(w http.ResponseWriter, r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !s.corsAllowed(o) && !sameOrigin(r, o) {
		return &apiError{Status: http.StatusForbidden, Msg: "origin " + o + " may not open a WebSocket here (--cors)"}
	}
	thread := r.PathValue("thread_id")
	if _, err := s.svc.Thread(r.Context(), thread); err != nil && (!errors.Is(err, runs.ErrNotFound) || !isUpgrade(r)) {
		return err
	}
	if !isUpgrade(r) {
		return &apiError{Status: http.StatusUpgradeRequired, Msg: "this route is a WebSocket (POST it for server-sent events)"}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // the origin is checked above
	if err != nil {
		return nil // Accept answered the client
	}
	conn.SetReadLimit(s.cfg.MaxBodyBytes)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ws := &v2Socket{s: s, thread: thread, conn: conn, subs: map[string]*v2Filter{}}
	go ws.follow(ctx)
	ws.read(ctx)
	_ = conn.Close(websocket.StatusNormalClosure, "")
	return nil
}

// isUpgrade reports whether a request asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// sameOrigin reports whether origin is the server's own.
func sameOrigin(r *http.Request, origin string) bool {
	return origin == "http://"+r.Host || origin == "https://"+r.Host
}

// read runs the commands the client sends until it leaves.
func (ws *v2Socket) read(ctx context.Context) {
	for {
		_, data, err := ws.conn.Read(ctx)
		if err != nil {
			return
		}
		c, err := checkV2Command(data)
		if err != nil {
			code, msg := ws.s.v2ErrorOf(err)
			ws.write(ctx, v2Reply{Type: "error", Error: code, Message: msg})
			continue
		}
		switch c.Method {
		case "subscription.subscribe":
			ws.subscribe(ctx, c)
		case "subscription.unsubscribe":
			ws.unsubscribe(ctx, c)
		default:
			go func() { ws.write(ctx, ws.s.v2Run(ctx, ws.thread, c)) }() // a respond may wait for its interrupt
		}
	}
}

// subscribe adds a subscription, answers, then replays what the socket
// has seen that it matches: the answer comes before its events.
func (ws *v2Socket) subscribe(ctx context.Context, c v2Command) {
	f, err := checkV2Filter(c.Params, false)
	if err != nil {
		code, msg := ws.s.v2ErrorOf(err)
		ws.write(ctx, v2Reply{Type: "error", ID: c.ID, Error: code, Message: msg})
		return
	}
	id := uuid.NewString()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.subs[id] = &f
	n := 0
	for i := range ws.seen {
		if f.matches(&ws.seen[i]) {
			n++
		}
	}
	ws.writeLocked(ctx, v2Reply{Type: "success", ID: c.ID, Result: map[string]any{"subscription_id": id, "replayed_events": n},
		Meta: map[string]any{"thread_id": ws.thread}})
	for i := range ws.seen {
		if f.matches(&ws.seen[i]) {
			ws.writeLocked(ctx, &ws.seen[i])
		}
	}
}

func (ws *v2Socket) unsubscribe(ctx context.Context, c v2Command) {
	var p struct {
		ID string `json:"subscription_id"`
	}
	_ = json.Unmarshal(c.Params, &p)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if _, ok := ws.subs[p.ID]; !ok {
		ws.writeLocked(ctx, v2Reply{Type: "error", ID: c.ID, Error: "no_such_subscription", Message: "no subscription " + p.ID + " on this socket"})
		return
	}
	delete(ws.subs, p.ID)
	ws.writeLocked(ctx, v2Reply{Type: "success", ID: c.ID, Result: map[string]any{}, Meta: map[string]any{"thread_id": ws.thread}})
}

// follow sends the thread's events to the subscriptions that match them,
// from the thread's newest run (waiting for the thread to be made).
func (ws *v2Socket) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := ws.s.svc.V2Stream(ctx, ws.thread, 0, true, func(evs []runs.V2Event) error { // subscriptions come and go: the values are built
			ws.mu.Lock()
			defer ws.mu.Unlock()
			for i := range evs {
				ws.seen = append(ws.seen, evs[i])
				if ws.wanted(&evs[i]) {
					ws.writeLocked(ctx, &evs[i])
				}
			}
			if over := len(ws.seen) - v2SocketBuffer; over > 0 {
				ws.seen = append(ws.seen[:0], ws.seen[over:]...)
			}
			return nil
		})
		if err == nil || !errors.Is(err, runs.ErrNotFound) {
			return
		}
		select { // no thread yet
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// wanted reports whether a subscription matches an event.
func (ws *v2Socket) wanted(ev *runs.V2Event) bool {
	for _, f := range ws.subs {
		if f.matches(ev) {
			return true
		}
	}
	return false
}

func (ws *v2Socket) write(ctx context.Context, v any) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.writeLocked(ctx, v)
}

func (ws *v2Socket) writeLocked(ctx context.Context, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	_ = ws.conn.Write(ctx, websocket.MessageText, b)
}
