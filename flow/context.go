package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cairn-dev/cairn/store"
)

// RunInfo describes the task a node is running as.
type RunInfo struct {
	RunID     string
	Thread    string
	Namespace string
	// ReadSeq is the checkpoint whose state the step reads.
	ReadSeq int64
	Node    string
	// Index is the task's position in its step.
	Index int
	// Key is the task's idempotency key, "thread/seq/node" in the root
	// namespace and "thread/ns/seq/node" in others (with "#index" when the
	// node runs more than once in the step). It is the same every time the
	// step is run again after a crash, a failure or an interrupt, and
	// differs between namespaces (the gates of one pipeline, subgraphs);
	// tools use it to make side effects happen once.
	Key     string
	Attempt int
}

type taskCtxKey struct{}

// task is what a running node can reach through its context.
type task struct {
	info   RunInfo
	input  json.RawMessage
	resume json.RawMessage // value to return from Interrupt, if resuming this task
	runner *Runner         // the runner running the task (subgraphs use its store)
	head   int64           // the head the step started from (the journal's attempt chain)

	mu     sync.Mutex
	tokens tokenCount
	extra  map[string]any // Annotate
	// journal holds the task's journal entries, loaded on first use.
	journal map[string]json.RawMessage
	// calls counts the task's outside calls (BeginCall); values is
	// TaskValue's.
	calls  int
	values map[string]any
	// inbox is the step's share of the thread's inbox (TakeSteers).
	inbox *stepInbox
	// stepCalls keeps the step's call records for its commit (nil:
	// RecordCall writes them at once).
	stepCalls *stepCalls
}

type tokenCount struct{ in, out int64 }

func withTask(ctx context.Context, t *task) context.Context {
	return context.WithValue(ctx, taskCtxKey{}, t)
}

func taskOf(ctx context.Context) *task {
	t, _ := ctx.Value(taskCtxKey{}).(*task)
	return t
}

// Info returns the running task's description; ok is false outside a node.
func Info(ctx context.Context) (RunInfo, bool) {
	if t := taskOf(ctx); t != nil {
		return t.info, true
	}
	return RunInfo{}, false
}

// Input returns the task's own input (from Send), or nil.
func Input(ctx context.Context) json.RawMessage {
	if t := taskOf(ctx); t != nil {
		return t.input
	}
	return nil
}

// AddTokens reports model tokens used by the running node; they count
// against the token budget and are recorded in the step's checkpoint.
func AddTokens(ctx context.Context, input, output int64) {
	if t := taskOf(ctx); t != nil {
		t.mu.Lock()
		t.tokens.in += input
		t.tokens.out += output
		t.mu.Unlock()
	}
}

// Annotate records value under key in the metadata of the checkpoint the
// running step commits (store.Meta.Extra), for traces and audits: what a
// step observed or decided without putting it into the state. Values must
// encode as JSON; the runner's redactor applies. When several tasks of a
// step annotate the same key, the last task in step order wins. An
// annotation of a task whose update is kept as a pending write (a sibling
// failed) is not kept.
func Annotate(ctx context.Context, key string, value any) {
	if t := taskOf(ctx); t != nil {
		t.mu.Lock()
		if t.extra == nil {
			t.extra = map[string]any{}
		}
		t.extra[key] = value
		t.mu.Unlock()
	}
}

// Interrupt asks for input. When the run is being resumed with a value for
// this task, Interrupt decodes it into out (when out is not nil) and returns
// nil. Otherwise it returns an *InterruptError carrying payload, which the
// node must return: the run stops with stop reason "interrupt" and resumes
// at this node, which then runs again from its start. WithResponseSchema
// says which answer it expects (checked when the run is resumed).
func Interrupt(ctx context.Context, payload any, out any, opts ...InterruptOption) error {
	t := taskOf(ctx)
	if t == nil {
		return fmt.Errorf("%w: Interrupt called outside a node", ErrInvalidGraph)
	}
	if t.resume != nil {
		if err := recordAnswer(ctx, t.resume); err != nil {
			return err
		}
		if out != nil {
			if err := json.Unmarshal(t.resume, out); err != nil {
				return fmt.Errorf("flow: resume value for %q: %w", t.info.Node, err)
			}
		}
		return nil
	}
	var o interruptOptions
	for _, opt := range opts {
		opt(&o)
	}
	var schema json.RawMessage
	if o.schema != nil {
		doc, _, err := compileSchema(o.schema)
		if err != nil {
			return fmt.Errorf("flow: interrupt of %q: %w", t.info.Node, err)
		}
		schema = doc
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("flow: interrupt payload of %q: %w", t.info.Node, err)
	}
	return &InterruptError{Node: t.info.Node, Payload: b, ResponseSchema: schema}
}

// parentTaskKey is the Meta.Extra key naming the task of an enclosing run
// that started a nested run (a subgraph, a gate's or a handoff's agent).
const parentTaskKey = "parent_task"

func setParentTask(m *store.Meta, key string) {
	if m.Extra == nil {
		m.Extra = map[string]any{}
	}
	m.Extra[parentTaskKey] = key
}

// ParentTask returns the idempotency key of the enclosing run's task that
// started the nested run whose input checkpoint cp is, if it was started
// inside one. A task re-run after a crash has the same key; a task of a
// forked branch has another, so a caller can tell a nested run to continue
// from one that belongs to an older branch without comparing clocks.
func ParentTask(cp store.Checkpoint) (string, bool) {
	k, ok := cp.Meta.Extra[parentTaskKey].(string)
	return k, ok && k != ""
}

// RunConfig is what the caller of a run gives every node besides the
// state: LangGraph's config.configurable (a user id, a model name) and the
// run's context (LangGraph's runtime context, a JSON object). Nodes read
// it with RunConfigOf and ContextAs; nested runs (subgraphs) see their
// parent's.
type RunConfig struct {
	Configurable map[string]any
	Context      json.RawMessage
}

type runConfigKey struct{}

// WithRunConfig returns a context whose runs give their nodes c: pass it
// to Invoke, Stream, Resume or RunFrom.
func WithRunConfig(ctx context.Context, c RunConfig) context.Context {
	return context.WithValue(ctx, runConfigKey{}, c)
}

// RunConfigOf returns the run's configuration (zero when its caller gave
// none).
func RunConfigOf(ctx context.Context) RunConfig {
	c, _ := ctx.Value(runConfigKey{}).(RunConfig)
	return c
}

// ContextAs decodes the run's context (RunConfig.Context) into a T; ok is
// false when the run has none.
func ContextAs[T any](ctx context.Context) (v T, ok bool, err error) {
	raw := RunConfigOf(ctx).Context
	if s := string(raw); s == "" || s == "null" {
		return v, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, true, fmt.Errorf("flow: the run's context: %w", err)
	}
	return v, true, nil
}
