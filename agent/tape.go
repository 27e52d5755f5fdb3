package agent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// Every model call and tool call a flow node makes through this package
// is recorded as one of the task's call records (flow.BeginCall,
// flow.RecordCall): the request as what changed since the task's
// previous model call, and the answer whole. A run with a flow.Tape in
// its context (package replay) is answered from the tape instead: the
// model and the tools are not called.

// Bounds of a call record.
const (
	// RecordedMessageBytes bounds the text of the messages a model call's
	// record keeps: the newest first, the older ones named only by the
	// digest of the whole prefix; a single message longer is cut, with a
	// marker.
	RecordedMessageBytes = 8 << 10
	// RecordedAnswerBytes bounds a recorded answer's text (a model reply's
	// content, a tool's output); a longer one is cut, marked truncated,
	// and cannot be replayed.
	RecordedAnswerBytes = 256 << 10
)

// ErrNotRecorded: a replayed call has no usable recording.
var ErrNotRecorded = errors.New("agent: call not recorded")

// RequestRecord is a model call's request as recorded: the digest of the
// whole request, then what changed since the task's previous model call.
type RequestRecord struct {
	// Digest is that of the whole request: SHA-256, its first 128 bits in
	// hex, as every digest of the record.
	Digest string `json:"digest"`
	// SystemDigest is that of the leading system messages; System holds
	// them when they differ from the previous call's (cut to the bound).
	SystemDigest string    `json:"system_digest,omitempty"`
	System       []Message `json:"system,omitempty"`
	// ToolsDigest is that of the tool specs; Tools names them when they
	// differ from the previous call's.
	ToolsDigest string   `json:"tools_digest,omitempty"`
	Tools       []string `json:"tools,omitempty"`
	// OptionsDigest covers the rest: schema, step, max tokens, temperature.
	OptionsDigest string `json:"options_digest"`
	// Prior messages of the conversation (after the system ones) are not
	// kept — those of the task's previous request, those up to the last
	// assistant reply (recorded with an earlier call), older ones past the
	// bound — and PriorDigest is their digest; Messages are the rest.
	Prior       int       `json:"prior,omitempty"`
	PriorDigest string    `json:"prior_digest,omitempty"`
	Messages    []Message `json:"messages,omitempty"`
	// Truncated: a message kept was cut to the bound.
	Truncated bool `json:"truncated,omitempty"`
}

// ModelCallRecord is the record of one model call.
type ModelCallRecord struct {
	Kind      string        `json:"kind"` // "model"
	Name      string        `json:"name"`
	Request   RequestRecord `json:"request"`
	Message   Message       `json:"message"`
	Usage     Usage         `json:"usage"`
	Model     string        `json:"model,omitempty"`
	Error     string        `json:"error,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
}

// ToolCallRecord is the record of one tool call.
type ToolCallRecord struct {
	Kind      string          `json:"kind"` // "tool"
	Name      string          `json:"name"`
	Request   ToolRequest     `json:"request"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	KV        json.RawMessage `json:"kv,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// ToolRequest is what a tool call asked: the tool and its arguments.
type ToolRequest struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// lastRequest is the task's previous model request, as TaskValue keeps it.
type lastRequest struct {
	system, tools string
	n             int    // its conversation's messages
	conv          string // their digest
}

const lastRequestKey = "agent.lastRequest"

// recordRequest makes the record of req, against the task's previous
// request, and remembers req as the previous one. It hashes the request
// once or twice and encodes only what it keeps: its cost is the
// request's bytes hashed, not encoded.
func recordRequest(ctx context.Context, req Request) RequestRecord {
	nsys := 0
	for nsys < len(req.Messages) && req.Messages[nsys].Role == RoleSystem {
		nsys++
	}
	sys, conv := req.Messages[:nsys], req.Messages[nsys:]
	rec := RequestRecord{OptionsDigest: digestOf([]any{req.Schema, req.Step, req.MaxTokens, req.Temperature})}
	if len(sys) > 0 {
		rec.SystemDigest = prefixDigests(sys, len(sys))[len(sys)]
	}
	if len(req.Tools) > 0 {
		rec.ToolsDigest = digestOf(req.Tools)
	}
	prev, _ := flow.TaskValue(ctx, lastRequestKey, func() any { return &lastRequest{} }).(*lastRequest)
	if prev == nil {
		prev = &lastRequest{}
	}
	if rec.SystemDigest != prev.system {
		rec.System, rec.Truncated = boundMessages(sys, RecordedMessageBytes/2)
	}
	if rec.ToolsDigest != prev.tools {
		for _, t := range req.Tools {
			rec.Tools = append(rec.Tools, t.Name)
		}
	}
	// What came before is implied: the task's previous request when this
	// one extends it, and everything up to the model's last reply (the
	// request and the reply of an earlier call, a step or a turn before:
	// recorded there). The digest of the prior messages still compares
	// them whole.
	afterReply := 0
	for i := len(conv) - 1; i >= 0; i-- {
		if conv[i].Role == RoleAssistant {
			afterReply = i + 1
			break
		}
	}
	// One pass over the conversation gives every digest wanted: where the
	// prior ends (the previous request, or the last reply) and where the
	// kept messages start for either.
	keepAfter := func(prior int) int {
		size, keep := 0, len(conv)
		for keep > prior { // the newest messages within the bound; older ones join the prior
			n := len(conv[keep-1].Content) + len(conv[keep-1].Name) + 64
			for _, tc := range conv[keep-1].ToolCalls {
				n += len(tc.Args) + len(tc.Name) + len(tc.ID)
			}
			if size+n > RecordedMessageBytes && keep < len(conv) {
				break
			}
			size += n
			keep--
		}
		return keep
	}
	keepReply, keepPrev := keepAfter(afterReply), keepAfter(max(afterReply, min(prev.n, len(conv))))
	sums := prefixDigests(conv, prev.n, afterReply, len(conv), keepReply, keepPrev)
	keep := keepReply
	if prev.n > afterReply && prev.n <= len(conv) && sums[prev.n] == prev.conv {
		keep = keepPrev
	}
	rec.Prior = keep
	if keep > 0 {
		rec.PriorDigest = sums[keep]
	}
	var cut bool
	rec.Messages, cut = boundMessages(withoutIDs(conv[keep:]), RecordedMessageBytes)
	rec.Truncated = rec.Truncated || cut
	rec.Digest = digest([]byte(rec.SystemDigest + rec.ToolsDigest + rec.OptionsDigest + sums[len(conv)]))[:digestLen]
	prev.system, prev.tools, prev.n, prev.conv = rec.SystemDigest, rec.ToolsDigest, len(conv), sums[len(conv)]
	return rec
}

// digestLen is the length of a record's digests: 128 bits, in hex.
const digestLen = 32

// prefixDigests hashes msgs once and returns the digest of msgs[:n] for
// each n asked (those in range): each message's fields length-prefixed,
// Cairn's message ids left out (a replay on another thread sends the same
// request with other ids).
func prefixDigests(msgs []Message, at ...int) map[int]string {
	out := make(map[int]string, len(at))
	h := sha256.New()
	var buf []byte
	field := func(s string) { // one write, from a buffer used again: no copy of s is allocated
		buf = append(binary.AppendUvarint(buf[:0], uint64(len(s))), s...)
		h.Write(buf)
	}
	// A long text goes in as its length and its 64-bit xxHash: the whole
	// conversation is hashed on every call, and xxHash reads it about ten
	// times faster than SHA-256 (the digests compare a replay's requests
	// with the recorded ones; nobody forges them).
	text := func(s string) {
		if len(s) <= 64 {
			field(s)
			return
		}
		buf = binary.AppendUvarint(buf[:0], uint64(len(s)))
		buf = binary.LittleEndian.AppendUint64(buf, xxhash.Sum64String(s))
		h.Write(buf)
	}
	sum := func(n int) {
		if slices.Contains(at, n) {
			out[n] = hex.EncodeToString(h.Sum(nil))[:digestLen]
		}
	}
	sum(0)
	for i, m := range msgs {
		field(string(m.Role))
		text(m.Content)
		field(m.Name)
		field(m.ToolCallID)
		field(strconv.Itoa(len(m.ToolCalls)))
		for _, tc := range m.ToolCalls {
			field(tc.ID)
			field(tc.Name)
			text(string(tc.Args))
		}
		sum(i + 1)
	}
	return out
}

func withoutIDs(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.ID = ""
		out[i] = m
	}
	return out
}

// boundMessages copies msgs with each content cut so that the total text
// stays within limit.
func boundMessages(msgs []Message, limit int) ([]Message, bool) {
	if len(msgs) == 0 {
		return nil, false
	}
	out := make([]Message, len(msgs))
	cut := false
	for i, m := range msgs {
		if len(m.Content) > limit {
			m.Content, cut = truncated(m.Content, limit), true
		}
		limit = max(limit-len(m.Content), 0)
		out[i] = m
	}
	return out, cut
}

func truncated(s string, limit int) string {
	return s[:limit] + "…[truncated " + strconv.Itoa(len(s)-limit) + " bytes]"
}

func digestOf(v any) string {
	b, _ := json.Marshal(v) // specs and options always encode
	return digest(b)[:digestLen]
}

// tapeCall is one call of a task: its position and, under a tape, the
// recorded answer.
type tapeCall struct {
	index int
	tape  flow.Tape
}

func beginCall(ctx context.Context) tapeCall {
	return tapeCall{index: flow.BeginCall(ctx), tape: flow.TapeOf(ctx)}
}

// answer asks the tape for the call's recorded answer (the new record,
// redacted as it would be stored, goes with the question).
func (c tapeCall) answer(ctx context.Context, kind, name string, rec, out any) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("agent: %s %s: %w", kind, name, err)
	}
	b = flow.Redactor(ctx).JSON(b)
	info, _ := flow.Info(ctx)
	raw, err := c.tape.Answer(ctx, flow.Call{Task: info, Index: c.index, Kind: kind, Name: name, Request: b})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrNotRecorded, kind, name, err)
	}
	return nil
}

// generateRecorded makes model call name: from the tape when the run has
// one, else from the model; either way it records it.
func generateRecorded(ctx context.Context, m Model, req Request, agentName, name string) (Response, error) {
	c := beginCall(ctx)
	if c.index < 0 && c.tape == nil {
		return generate(ctx, m, req, agentName, name) // outside a flow node: nothing to record
	}
	rec := ModelCallRecord{Kind: "model", Name: name, Request: recordRequest(ctx, req)}
	var resp Response
	var err error
	if c.tape != nil {
		var got ModelCallRecord
		if err = c.answer(ctx, "model", name, rec.Request, &got); err == nil {
			switch {
			case got.Kind != "model" || got.Truncated:
				err = fmt.Errorf("%w: model call %s: the recording holds no whole reply", ErrNotRecorded, name)
			case got.Error != "":
				err = fmt.Errorf("%w: model call %s failed when recorded: %s", ErrNotRecorded, name, got.Error)
			}
			resp = Response{Message: got.Message, Usage: got.Usage, Model: got.Model}
		}
	} else {
		resp, err = generate(ctx, m, req, agentName, name)
	}
	rec.Message, rec.Usage, rec.Model = resp.Message, resp.Usage, resp.Model
	if err != nil {
		rec.Error = err.Error()
	}
	if len(rec.Message.Content) > RecordedAnswerBytes {
		rec.Message.Content, rec.Truncated = truncated(rec.Message.Content, RecordedAnswerBytes), true
	}
	if rerr := flow.RecordCall(ctx, c.index, rec); rerr != nil && err == nil {
		err = fmt.Errorf("agent: recording model call %s: %w", name, rerr)
	}
	return resp, err
}

// runToolRecorded runs a tool call: from the tape when the run has one,
// else for real; either way it records it.
func runToolRecorded(ctx context.Context, byName map[string]Tool, call ToolCall, tc ToolContext) ToolResult {
	c := beginCall(ctx)
	info, _ := flow.Info(ctx)
	name := strings.TrimPrefix(tc.Key, info.Key+"/")
	if tc.Key == "" {
		name = "tool/" + call.Name
	}
	rec := ToolCallRecord{Kind: "tool", Name: name, Request: ToolRequest{Tool: call.Name, Args: compactJSON(string(call.Args))}}
	var tr ToolResult
	if c.tape != nil {
		var got ToolCallRecord
		err := c.answer(ctx, "tool", name, rec.Request, &got)
		if err == nil && (got.Kind != "tool" || got.Truncated) {
			err = fmt.Errorf("%w: tool call %s: the recording holds no whole result", ErrNotRecorded, name)
		}
		if err == nil {
			err = replayKV(tc.KV, got.KV)
		}
		tr = ToolResult{ID: call.ID, Name: call.Name, Output: got.Output, Error: got.Error}
		if err != nil {
			tr = ToolResult{ID: call.ID, Name: call.Name, Error: err.Error()}
		}
	} else {
		tr = runTool(ctx, byName, call, tc)
		if ctx.Err() != nil {
			return tr // cut short by the run's cancellation: not a result to keep
		}
	}
	rec.Output, rec.Error = tr.Output, tr.Error
	if len(rec.Output) > RecordedAnswerBytes {
		rec.Output, rec.Truncated = nil, true
	}
	if tc.KV != nil {
		rec.KV, _ = tc.KV.Update()[state.KVField].(json.RawMessage)
	}
	_ = flow.RecordCall(ctx, c.index, rec) // best effort: the tool has run, its result stands
	return tr
}
