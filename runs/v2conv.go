package runs

// LangGraph's thread-centric streaming protocol ("v2") reads a thread as
// one stream of events across its runs. Each run's events are made from
// its durable log, the same way every time it is read: a run's events
// keep their numbers (seq) and ids across replays, restarts and workers.

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// V2Event is one event of the thread-centric protocol: {type: "event",
// event_id, seq, method, params: {namespace, timestamp, node?, data}}.
type V2Event struct {
	Type    string   `json:"type"`
	EventID string   `json:"event_id"`
	Seq     int64    `json:"seq"`
	Method  string   `json:"method"`
	Params  V2Params `json:"params"`
}

// V2Params are an event's namespace, time (Unix milliseconds), node and
// data.
type V2Params struct {
	Namespace []string `json:"namespace"`
	Timestamp int64    `json:"timestamp"`
	Node      string   `json:"node,omitempty"`
	Data      any      `json:"data"`
}

// Channel is the channel a subscriber names to receive the event.
func (e *V2Event) Channel() string {
	if e.Method == "input.requested" {
		return "input"
	}
	return e.Method
}

// An event's seq: the run's ordinal on its thread in the bits above
// v2SeqBits; below them the part of the run that sent it (v2AttemptBits
// above v2IndexBits: 0 the run's start, n its attempt n, v2EndSlot its
// end) and its number within that part. A part's events are made from
// its own events in the log alone, so that every reader numbers them
// alike, whatever it read of an attempt a crash cut short: the next
// attempt's events come after them all.
const (
	v2SeqBits   = 26
	v2IndexBits = 20
	v2EndSlot   = 1<<(v2SeqBits-v2IndexBits) - 1
)

// V2SeqBase is the seq before the first event of the run of an ordinal.
func V2SeqBase(ordinal int64) int64 { return ordinal << v2SeqBits }

// V2OrdinalOf is the ordinal of the run whose event has seq.
func V2OrdinalOf(seq int64) int64 { return seq >> v2SeqBits }

// v2Conv makes one run's protocol events from its log, in order.
type v2Conv struct {
	run, thread, graph string
	base               int64
	slot               int   // the part of the run the next event is of
	n                  int64 // events of the slot so far
	now                func() int64
	open               []*v2Message // messages streaming, oldest first
	asked              map[string]bool
	interrupted        bool
	valuesAsk          bool // input requests come from values events (v2ValuesAsk)
	failed             string
	out                []V2Event
}

// v2Message is an AI message whose tokens are streaming.
type v2Message struct {
	id, node string
	ns       []string
	text     strings.Builder
}

func newV2Conv(run, thread, graph string, ordinal int64, now func() int64) *v2Conv {
	return &v2Conv{run: run, thread: thread, graph: graph, base: V2SeqBase(ordinal), now: now, asked: map[string]bool{}}
}

// emit adds an event, numbered next.
func (c *v2Conv) emit(method string, ns []string, node string, data any) {
	if c.n+1 >= 1<<v2IndexBits {
		return // a part of 2^20 events: the rest are not numbered, so not sent
	}
	c.n++
	seq := c.base + int64(c.slot)<<v2IndexBits + c.n
	if ns == nil {
		ns = []string{}
	}
	c.out = append(c.out, V2Event{Type: "event", EventID: strconv.FormatInt(seq, 10), Seq: seq, Method: method,
		Params: V2Params{Namespace: ns, Timestamp: c.now(), Node: node, Data: data}})
}

// take returns the events made so far and forgets them; a values event
// without data (a state the reader does not want, or none) keeps its
// number but is not sent.
func (c *v2Conv) take() []V2Event {
	out := c.out[:0:0]
	for _, e := range c.out {
		if e.Method != "values" || e.Params.Data != nil {
			out = append(out, e)
		}
	}
	c.out = nil
	return out
}

// start is the run's first event: it is running.
func (c *v2Conv) start() {
	c.emit("lifecycle", nil, "", map[string]any{"event": "running", "graph_name": c.graph})
}

// event converts one event of the run's log (its SSE name and data) that
// an attempt of the run sent. A later attempt (the run picked up after a
// crash) streams its messages again from their start: a message-start
// with the same id begins each anew in the client.
func (c *v2Conv) event(name string, data json.RawMessage, attempt int) {
	if attempt = min(max(attempt, 1), v2EndSlot-1); attempt != c.slot {
		c.open, c.slot, c.n = nil, attempt, 0
	}
	mode, nsText, _ := strings.Cut(name, "|")
	ns := []string{}
	if nsText != "" {
		ns = strings.Split(nsText, "|")
	}
	switch mode {
	case "messages":
		c.message(ns, data)
	case "values":
		c.finishMessages(ns)
		c.values(ns, data)
	case "updates":
		c.finishMessages(ns)
		c.updates(ns, data)
	case "custom":
		c.emit("custom", ns, "", map[string]any{"payload": json.RawMessage(data)})
	case "tasks":
		c.emit("tasks", ns, "", json.RawMessage(data))
	case "checkpoints":
		c.checkpoint(ns, data)
	case "error":
		var e struct{ Message string }
		_ = json.Unmarshal(data, &e)
		c.failed = e.Message
	}
}

// values sends a state (nil: one the reader does not want), without its
// pending interrupts, which are input requests when the run's values
// bring them (valuesAsk).
func (c *v2Conv) values(ns []string, data json.RawMessage) {
	var v map[string]json.RawMessage
	if data == nil {
		c.emit("values", ns, "", nil) // numbered, not built: the reader does not want it
		return
	}
	if json.Unmarshal(data, &v) != nil {
		c.emit("values", ns, "", data)
		return
	}
	if in, ok := v["__interrupt__"]; ok {
		if c.valuesAsk {
			c.inputRequests(ns, in)
		}
		delete(v, "__interrupt__")
	}
	if len(v) == 0 {
		c.emit("values", ns, "", nil) // numbered, not sent: a pause's values are its interrupt alone
		return
	}
	c.emit("values", ns, "", v)
}

// updates sends a node's update; an update of __interrupt__ asks for input.
func (c *v2Conv) updates(ns []string, data json.RawMessage) {
	var v map[string]json.RawMessage
	if json.Unmarshal(data, &v) != nil {
		return
	}
	for _, node := range slices.Sorted(maps.Keys(v)) {
		if node == "__interrupt__" {
			c.inputRequests(ns, v[node])
			continue
		}
		c.emit("updates", ns, node, map[string]any{"node": node, "values": v[node]})
		c.tools(ns, node, v[node])
	}
}

// inputRequests sends each interrupt not asked for yet.
func (c *v2Conv) inputRequests(ns []string, raw json.RawMessage) {
	var ins []struct {
		ID     string          `json:"id"`
		Value  json.RawMessage `json:"value"`
		Schema json.RawMessage `json:"response_schema"`
	}
	if json.Unmarshal(raw, &ins) != nil {
		return
	}
	for _, in := range ins {
		if in.ID == "" || c.asked[in.ID] {
			continue
		}
		c.asked[in.ID], c.interrupted = true, true
		req := map[string]any{"interrupt_id": in.ID, "payload": in.Value}
		if len(in.Schema) > 0 {
			req["response_schema"] = in.Schema // the answer's JSON Schema (the data is extensible)
		}
		c.emit("input.requested", ns, "", req)
	}
}

// checkpoint sends a checkpoint's id, parent, step and source.
func (c *v2Conv) checkpoint(ns []string, data json.RawMessage) {
	var cp struct {
		Config struct {
			Configurable struct {
				ID string `json:"checkpoint_id"`
			} `json:"configurable"`
		} `json:"config"`
		Parent *struct {
			Configurable struct {
				ID string `json:"checkpoint_id"`
			} `json:"configurable"`
		} `json:"parent_config"`
		Metadata struct {
			Step   int64  `json:"step"`
			Source string `json:"source"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &cp) != nil || cp.Config.Configurable.ID == "" {
		return
	}
	out := map[string]any{"id": cp.Config.Configurable.ID, "step": cp.Metadata.Step, "source": cp.Metadata.Source}
	if cp.Parent != nil && cp.Parent.Configurable.ID != "" {
		out["parent_id"] = cp.Parent.Configurable.ID
	}
	c.emit("checkpoints", ns, "", out)
}

// end is the run's last event: how it ended (status, its record's), an
// interrupt asked for making it interrupted.
func (c *v2Conv) end(status, errText string) {
	c.slot, c.n = v2EndSlot, 0
	c.finishMessages(nil)
	ev := map[string]any{"graph_name": c.graph}
	switch {
	case c.failed != "" || status == StatusError:
		ev["event"], ev["error"] = "failed", cmp.Or(c.failed, errText, status)
	case c.interrupted || status == StatusInterrupted:
		ev["event"] = "interrupted"
	default:
		ev["event"] = "completed"
	}
	c.emit("lifecycle", nil, "", ev)
}
