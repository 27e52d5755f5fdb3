package runs

import (
	"encoding/json"
	"strings"
	"testing"
)

// v2Log is a run's log as the converter reads it: name, data, attempt.
type v2Log []struct {
	name, data string
	attempt    int
}

// convert makes a run's protocol events from its log and end.
func (l v2Log) convert(status string) []V2Event {
	c := newV2Conv("r1", "t1", "g", 3, func() int64 { return 1 })
	c.start()
	for _, e := range l {
		c.event(e.name, json.RawMessage(e.data), e.attempt)
	}
	c.end(status, "")
	return c.take()
}

// summary is each event's method and the field that tells it apart.
func summary(evs []V2Event) string {
	var out []string
	for _, e := range evs {
		b, _ := json.Marshal(e.Params.Data)
		var d map[string]any
		_ = json.Unmarshal(b, &d)
		tag := e.Method
		for _, k := range []string{"event", "interrupt_id", "node"} {
			if v, ok := d[k].(string); ok {
				tag += ":" + v
				break
			}
		}
		out = append(out, tag)
	}
	return strings.Join(out, " ")
}

func TestV2Conv(t *testing.T) {
	chunk := func(text string) string {
		return `[{"type":"AIMessageChunk","id":"m1","content":"` + text + `"},{"langgraph_node":"agent"}]`
	}
	for _, tc := range []struct {
		name   string
		log    v2Log
		status string
		want   string
	}{
		{"a reply streamed", v2Log{{"metadata", `{}`, 1}, {"values", `{"messages":[]}`, 1}, {"messages", chunk("Hel"), 1}, {"messages", chunk("lo"), 1},
			{"updates", `{"agent":{"messages":[{"type":"ai","id":"m1","content":"Hello"}]}}`, 1}, {"values", `{"messages":[1]}`, 1}}, StatusSuccess,
			"lifecycle:running values messages:message-start messages:content-block-start messages:content-block-delta messages:content-block-delta messages:content-block-finish messages:message-finish updates:agent values lifecycle:completed"},
		{"an interrupt asked once", v2Log{{"updates", `{"__interrupt__":[{"id":"i1","value":"ok?"}]}`, 1}, {"values", `{"x":1,"__interrupt__":[{"id":"i1","value":"ok?"}]}`, 1}}, StatusSuccess,
			"lifecycle:running input.requested:i1 values lifecycle:interrupted"},
		{"tool calls and results", v2Log{{"updates", `{"agent":{"messages":[{"type":"ai","tool_calls":[{"id":"c1","name":"ls","args":{}}]}]}}`, 1},
			{"updates", `{"tools":{"messages":[{"type":"tool","tool_call_id":"c1","content":"a"},{"type":"tool","tool_call_id":"c2","content":"no","status":"error"}]}}`, 1}}, StatusSuccess,
			"lifecycle:running updates:agent tools:tool-started updates:tools tools:tool-finished tools:tool-error lifecycle:completed"},
		{"an attempt cut short starts its message anew", v2Log{{"messages", chunk("Hel"), 1}, {"messages", chunk("Hel"), 2}, {"messages", chunk("lo"), 2}}, StatusSuccess,
			"lifecycle:running messages:message-start messages:content-block-start messages:content-block-delta messages:message-start messages:content-block-start messages:content-block-delta messages:content-block-delta messages:content-block-finish messages:message-finish lifecycle:completed"},
		{"an error", v2Log{{"error", `{"error":"X","message":"boom"}`, 1}}, StatusError, "lifecycle:running lifecycle:failed"},
		{"custom and checkpoints", v2Log{{"custom", `{"p":1}`, 1}, {"checkpoints", `{"config":{"configurable":{"checkpoint_id":"c"}},"metadata":{"step":2,"source":"loop"}}`, 1}, {"checkpoints", `{}`, 1}}, StatusSuccess,
			"lifecycle:running custom checkpoints lifecycle:completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := tc.log.convert(tc.status)
			if got := summary(evs); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			for i, e := range evs {
				if V2OrdinalOf(e.Seq) != 3 || (i > 0 && e.Seq <= evs[i-1].Seq) || e.EventID == "" {
					t.Fatalf("event %d: seq %d after %d (ordinal %d)", i, e.Seq, evs[max(i-1, 0)].Seq, V2OrdinalOf(e.Seq))
				}
			}
		})
	}
}

// TestV2ConvPrefix: a reader that read part of an attempt numbers its
// events as one that read all of it does.
func TestV2ConvPrefix(t *testing.T) {
	log := v2Log{{"values", `{"a":1}`, 1}, {"messages", `[{"type":"AIMessageChunk","id":"m","content":"x"},{}]`, 1}, {"updates", `{"n":{"a":2}}`, 1}, {"values", `{"a":2}`, 1}}
	whole := log.convert(StatusSuccess)
	for n := range log {
		part := log[:n].convert(StatusSuccess)
		for i, e := range part {
			if (e.Seq>>v2IndexBits)&v2EndSlot == v2EndSlot {
				break // the part's own end
			}
			if e.Seq != whole[i].Seq || e.Method != whole[i].Method {
				t.Fatalf("prefix %d, event %d: %s %d, whole %s %d", n, i, e.Method, e.Seq, whole[i].Method, whole[i].Seq)
			}
		}
	}
}
