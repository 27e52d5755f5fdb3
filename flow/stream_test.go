package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// emitting is a chain a → b whose nodes send a custom event each.
func emitting() *flow.Graph {
	node := func(name string) flow.NodeFunc {
		return func(ctx context.Context, d state.Doc) (state.Update, error) {
			if err := flow.Emit(ctx, map[string]string{"progress": name}); err != nil {
				return nil, err
			}
			return state.Update{"log": name, "count": 1}, nil
		}
	}
	return flow.NewGraph(schema).AddNode("a", node("a")).AddNode("b", node("b")).Chain("a", "b")
}

// collect runs a stream to its end: the kinds of its events and the last
// event and error.
func collect(t *testing.T, seq func(yield func(flow.Event, error) bool)) (kinds []string, events []flow.Event, last flow.Event, err error) {
	t.Helper()
	for ev, e := range seq {
		kinds = append(kinds, string(ev.Kind))
		events = append(events, ev)
		last, err = ev, e
	}
	return kinds, events, last, err
}

func TestStreamModes(t *testing.T) {
	tests := []struct {
		name  string
		modes []flow.StreamMode
		want  string
	}{
		{"default is values", nil, "values values values result"},
		{"updates", []flow.StreamMode{flow.StreamUpdates}, "update update result"},
		{"custom", []flow.StreamMode{flow.StreamCustom}, "custom custom result"},
		{"checkpoints", []flow.StreamMode{flow.StreamCheckpoints}, "checkpoint checkpoint checkpoint result"},
		{"tasks", []flow.StreamMode{flow.StreamTasks}, "node_start node_end node_start node_end result"},
		{"several at once", []flow.StreamMode{flow.StreamUpdates, flow.StreamCustom}, "custom update custom update result"},
		{"debug is everything", []flow.StreamMode{flow.StreamDebug}, "checkpoint run_start values step_start node_start custom node_end update checkpoint step_end values step_start node_start custom node_end update checkpoint step_end values run_end result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, emitting(), inmem.Open(store.Options{}), flow.Options{})
			kinds, events, last, err := collect(t, r.Stream(context.Background(), "t", state.Update{"count": 0}, flow.StreamOptions{Modes: tc.modes}))
			if err != nil || strings.Join(kinds, " ") != tc.want {
				t.Fatalf("events %q, %v; want %q", strings.Join(kinds, " "), err, tc.want)
			}
			if last.Result == nil || last.Result.StopReason != state.StopSuccess || last.Result.Head != 3 {
				t.Fatalf("result %+v", last.Result)
			}
			for _, ev := range events {
				checkEvent(t, ev)
			}
		})
	}
}

// checkEvent checks what each kind of event carries.
func checkEvent(t *testing.T, ev flow.Event) {
	t.Helper()
	switch ev.Kind {
	case flow.EventValues:
		var n int
		if ev.State == nil || ev.State.Get("count", &n) != nil || int64(n) != ev.Seq-1 {
			t.Fatalf("values at %d: %v", ev.Seq, ev.State)
		}
	case flow.EventCheckpoint:
		if ev.Seq == 0 || ev.Parent != ev.Seq-1 || ev.Status != "SUCCESS" {
			t.Fatalf("checkpoint %+v", ev)
		}
	case flow.EventCustom:
		if !strings.Contains(string(ev.Payload), `"progress":"`+ev.Node+`"`) {
			t.Fatalf("custom %+v", ev)
		}
	case flow.EventUpdate:
		if ev.Node == "" || !strings.Contains(string(ev.Payload), ev.Node) {
			t.Fatalf("update %+v", ev)
		}
	}
}

// A stream ends on an interrupt with its payload, and StreamResume
// continues the run with the answer.
func TestStreamInterruptAndResume(t *testing.T) {
	g := flow.NewGraph(schema).AddNode("ask", func(ctx context.Context, d state.Doc) (state.Update, error) {
		var answer string
		if err := flow.Interrupt(ctx, "publish?", &answer); err != nil {
			return nil, err
		}
		return state.Update{"log": answer}, nil
	}).Chain("ask")
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{})
	kinds, events, last, err := collect(t, r.Stream(context.Background(), "t", nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamUpdates}}))
	if err != nil || strings.Join(kinds, " ") != "interrupt result" || last.Result.StopReason != state.StopInterrupt {
		t.Fatalf("events %v, %v, %+v", kinds, err, last.Result)
	}
	if !strings.Contains(string(events[0].Payload), "publish?") {
		t.Fatalf("interrupt payload %s", events[0].Payload)
	}
	kinds, events, _, err = collect(t, r.StreamResume(context.Background(), "t", "yes", flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamUpdates}}))
	if err != nil || strings.Join(kinds, " ") != "update result" || !strings.Contains(string(events[0].Payload), "yes") {
		t.Fatalf("resume events %v, %v", kinds, err)
	}
}

// A failed node ends the stream with an error event and the error.
func TestStreamFailure(t *testing.T) {
	boom := errors.New("boom")
	g := flow.NewGraph(schema).AddNode("n", func(context.Context, state.Doc) (state.Update, error) { return nil, boom }).Chain("n")
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{})
	kinds, _, last, err := collect(t, r.Stream(context.Background(), "t", nil, flow.StreamOptions{}))
	if !errors.Is(err, boom) || strings.Join(kinds, " ") != "values error result" || last.Result.StopReason != state.StopUnrecoverableError {
		t.Fatalf("events %v, %v", kinds, err)
	}
}

// Stopping early cancels the run: nothing after the step in flight is
// committed and the stream returns (the run's goroutine has ended).
func TestStreamConsumerStops(t *testing.T) {
	st := inmem.Open(store.Options{})
	r := newRunner(t, forever("n"), st, flow.Options{RecursionLimit: -1})
	n := 0
	for ev, err := range r.Stream(context.Background(), "t", nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamCheckpoints}, Buffer: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			_ = ev
			break
		}
	}
	head, err := st.Load(context.Background(), store.LoadRequest{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	again, _ := st.Load(context.Background(), store.LoadRequest{Thread: "t"})
	if again.Seq != head.Seq || head.Seq > 3+2 {
		t.Fatalf("the run went on after the consumer stopped: head %d then %d", head.Seq, again.Seq)
	}
}

// A slow consumer slows the run: with a buffer of B, the run is never more
// than B+1 commits ahead of what the consumer has read.
func TestStreamBackpressure(t *testing.T) {
	st := inmem.Open(store.Options{})
	r := newRunner(t, forever("n"), st, flow.Options{RecursionLimit: 20})
	const buffer = 2
	read := 0
	for ev, err := range r.Stream(context.Background(), "t", nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamCheckpoints}, Buffer: buffer}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != flow.EventCheckpoint {
			continue
		}
		read++
		time.Sleep(5 * time.Millisecond) // the run gets every chance to run ahead
		head, err := st.Load(context.Background(), store.LoadRequest{Thread: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if ahead := int(head.Seq) - read; ahead > buffer+1 {
			t.Fatalf("after reading %d commits the run is at %d: %d ahead, buffer %d", read, head.Seq, ahead, buffer)
		}
	}
	if read != 21 {
		t.Fatalf("read %d commits, want 21", read)
	}
}

// Subgraph events carry their namespace and are left out unless asked for.
func TestStreamSubgraphs(t *testing.T) {
	child, err := emitting().Compile()
	if err != nil {
		t.Fatal(err)
	}
	g := flow.NewGraph(schema).AddNode("sub", flow.Subgraph(child, flow.SubgraphOptions{})).Chain("sub")
	for _, include := range []bool{false, true} {
		t.Run(fmt.Sprint("subgraphs=", include), func(t *testing.T) {
			r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{})
			_, events, _, err := collect(t, r.Stream(context.Background(), "t", nil, flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamCustom, flow.StreamUpdates}, Subgraphs: include}))
			if err != nil {
				t.Fatal(err)
			}
			var nss []string
			for _, ev := range events {
				if ev.Kind == flow.EventCustom {
					nss = append(nss, ev.Namespace)
				}
			}
			if !include && nss != nil {
				t.Fatalf("subgraph events without Subgraphs: %q", nss)
			}
			if include && (len(nss) != 2 || !strings.HasPrefix(nss[0], "sub") || nss[0] != nss[1]) {
				t.Fatalf("custom events from namespaces %q, want the subgraph's twice", nss)
			}
		})
	}
}

func TestStreamOptionsChecked(t *testing.T) {
	st := inmem.Open(store.Options{})
	r := newRunner(t, emitting(), st, flow.Options{})
	for _, so := range []flow.StreamOptions{{Modes: []flow.StreamMode{"tokens"}}, {Buffer: -1}} {
		_, _, _, err := collect(t, r.Stream(context.Background(), "t", nil, so))
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("%+v: %v", so, err)
		}
	}
	if _, err := st.Load(context.Background(), store.LoadRequest{Thread: "t"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("a refused stream stored something")
	}
}

// Emit outside a stream does nothing and fails nothing.
func TestEmitWithoutStream(t *testing.T) {
	r := newRunner(t, emitting(), inmem.Open(store.Options{}), flow.Options{})
	if res, err := r.Invoke(context.Background(), "t", nil); err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("%v %v", res.StopReason, err)
	}
	if err := flow.Emit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
}
