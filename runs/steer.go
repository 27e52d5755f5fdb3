package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
)

// Inbox entry states (InboxItem.State).
const (
	InboxPending  = "pending"
	InboxConsumed = "consumed"
	InboxRun      = "run"
)

// InboxItem is an entry of a thread's inbox as the API shows it: the
// entry, and what became of it.
type InboxItem struct {
	Seq     int64           `json:"seq"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
	// CreatedAt is when it was accepted (RFC 3339).
	CreatedAt string `json:"created_at"`
	// State is pending (no committed step took it yet), consumed (the
	// checkpoint CheckpointID took it) or run (run RunID was made of it,
	// and has not taken it yet). RunID names the run made of it, consumed
	// or not.
	State        string `json:"state"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
	RunID        string `json:"run_id,omitempty"`
}

// inbox is the store's inbox, nil when the store keeps none.
func (s *Service) inbox() *store.Inbox {
	ib, err := store.InboxOf(s.store)
	if err != nil {
		return nil
	}
	return ib
}

// flowInbox is the inbox runs take steering from (nil: none).
func (s *Service) flowInbox() flow.Inbox {
	if ib := s.inbox(); ib != nil {
		return ib
	}
	return nil
}

// Steerable reports whether a's runs take steering: a Go graph whose
// state has a steering field (flow.SteerField) and a chat; nil when they
// do, an ErrState error saying why not otherwise.
func Steerable(a Assistant) error {
	switch x := a.(type) {
	case *Graph:
		c := x.drawing()
		if c == nil {
			return newError(ErrState, "assistant %q: its graph could not be built to check its state", x.ID)
		}
		if _, err := flow.SteerField(c.Schema(), x.Options.SteerField); err != nil {
			return newError(ErrState, "assistant %q takes no steering: %v", x.ID, err)
		}
		return nil
	case *agentAssistant:
		if x.f.IsChat() {
			return nil
		}
		return newError(ErrState, "assistant %q is a chain agent file: only chats (kind: chat) and graphs with a messages field take steering", x.f.Name)
	}
	return newError(ErrState, "assistant %q takes no steering (pipelines run their gates' own files)", a.Info().ID)
}

// Steer sends message to thread id's running run: the run takes it at
// its next step boundary (a chat's next model call), through the state's
// messages reducer. With followUp it waits for the run to end instead,
// and a new run is made of it then. A message is a string (a human
// message) or a message object ({type or role, content}); it is redacted
// before it is stored. The thread must run an assistant that takes
// steering (Steerable); another tenant's thread is not found.
func (s *Service) Steer(ctx context.Context, id string, message json.RawMessage, followUp bool) (InboxItem, error) {
	th, err := s.Thread(ctx, id)
	if err != nil {
		return InboxItem{}, err
	}
	msg, err := steerMessage(message)
	if err != nil {
		return InboxItem{}, err
	}
	a, err := s.ThreadAssistant(ctx, th)
	if err != nil {
		return InboxItem{}, err
	}
	if err := Steerable(a); err != nil {
		return InboxItem{}, err
	}
	ib := s.inbox()
	if ib == nil {
		return InboxItem{}, newError(ErrState, "this store keeps no inbox")
	}
	head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID})
	var after int64
	switch {
	case err == nil && head.Meta.Usage != nil:
		after = head.Meta.Usage.Inbox
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return InboxItem{}, err
	}
	kind := store.InboxSteer
	if followUp {
		kind = store.InboxFollowUp
	}
	en, err := ib.Append(ctx, th.ID, after, kind, s.redact.JSON(msg))
	if err != nil {
		return InboxItem{}, err
	}
	return s.inboxItem(en, InboxPending, 0), nil
}

// steerMessage checks a message and gives it LangGraph's shape.
func steerMessage(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("$.message", "is missing: a string or {type or role, content}")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, invalid("$.message", "not JSON: %v", err)
	}
	switch m := v.(type) {
	case string:
		if m == "" {
			return nil, invalid("$.message", "is empty")
		}
	case map[string]any:
		if _, ok := m["content"]; !ok {
			return nil, invalid("$.message.content", "is missing: a message is a string or {type or role, content}")
		}
		_, typed := m["type"]
		role, _ := m["role"].(string)
		if _, known := roleTypes[role]; !typed && !known {
			return nil, invalid("$.message.type", "is missing: a message object names its type (human, ai, system, tool) or role (user, assistant, system, tool)")
		}
	default:
		return nil, invalid("$.message", "want a string or a message object, not %s", string(raw))
	}
	return json.Marshal(coerceMessage(v))
}

// Inbox lists thread id's inbox: every entry still kept, with what
// became of it.
func (s *Service) Inbox(ctx context.Context, id string) ([]InboxItem, error) {
	th, err := s.Thread(ctx, id)
	if err != nil {
		return nil, err
	}
	ib := s.inbox()
	if ib == nil {
		return []InboxItem{}, nil
	}
	ens, err := ib.Entries(ctx, th.ID, 0)
	if err != nil || len(ens) == 0 {
		return []InboxItem{}, err
	}
	takers, err := s.inboxTakers(ctx, th.ID, ens[0].Seq)
	if err != nil {
		return nil, err
	}
	out := make([]InboxItem, 0, len(ens))
	for _, en := range ens {
		switch at, ok := takerOf(takers, en.Seq); {
		case ok:
			out = append(out, s.inboxItem(en, InboxConsumed, at))
		case en.Run != "":
			out = append(out, s.inboxItem(en, InboxRun, 0))
		default:
			out = append(out, s.inboxItem(en, InboxPending, 0))
		}
	}
	return out, nil
}

// taker is a checkpoint of the head's lineage and the highest inbox
// entry consumed up to it (its Usage.Inbox).
type taker struct{ seq, cursor int64 }

// inboxTakers walks the head's lineage back, newest first, as far as the
// checkpoint before the one that consumed entry from.
func (s *Service) inboxTakers(ctx context.Context, thread string, from int64) ([]taker, error) {
	var out []taker
	want := int64(-1)
	for cp, err := range s.store.History(ctx, store.HistoryRequest{Thread: thread}) {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if want >= 0 && cp.Seq != want {
			continue
		}
		var c int64
		if cp.Meta.Usage != nil {
			c = cp.Meta.Usage.Inbox
		}
		out = append(out, taker{seq: cp.Seq, cursor: c})
		if c < from || cp.Parent == 0 {
			break
		}
		want = cp.Parent
	}
	return out, nil
}

// takerOf is the checkpoint that consumed entry seq: the oldest of the
// lineage whose cursor covers it (cursors only grow along a lineage).
func takerOf(ts []taker, seq int64) (int64, bool) {
	var at int64
	for _, t := range ts {
		if t.cursor < seq {
			break
		}
		at = t.seq
	}
	return at, at > 0
}

func (s *Service) inboxItem(en store.InboxEntry, st string, at int64) InboxItem {
	it := InboxItem{Seq: en.Seq, Kind: en.Kind, Message: en.Message, CreatedAt: APITime(time.Unix(0, en.CreatedAt)), State: st, RunID: en.Run}
	if at > 0 {
		it.CheckpointID = CheckpointID(at)
	}
	return it
}

// startFollowUps makes a run of the thread's pending inbox entries, if it
// has any no run was made of yet: follow-ups, and steers no step took
// before the thread's run ended (never lost). The run is queued behind
// any run of the thread (multitask strategy enqueue); its first step
// takes the entries (their order kept), and each entry records the run
// (InboxItem.RunID); entries made a run that ended without taking them
// (ending names the run whose end calls) are made a run again. A run of
// the thread that is pending already takes
// them in its first step: the entries record it, and no run is made
// (so a process that made the run and died before it recorded it in the
// entries makes none again). It returns the thread's last entry number
// as it read it (0: none), for the check made once the thread is idle
// (followUpsLate). A failure is logged: the entries stay pending, and
// the thread's next run takes them.
func (s *Service) startFollowUps(ctx context.Context, tenant, thread, assistantID, ending string) int64 {
	ib := s.inbox()
	if ib == nil {
		return 0
	}
	last, err := ib.Last(ctx, thread)
	if err != nil || last == 0 {
		return last // one key's read on a thread nobody steered
	}
	ens, err := s.pendingEntries(ctx, ib, thread, ending)
	if err != nil {
		s.log.Warn("reading a thread's inbox failed", "thread", thread, "err", err)
		return last
	}
	if len(ens) == 0 {
		return last
	}
	runID, err := s.followUpRun(ctx, tenant, thread, assistantID)
	if err != nil {
		s.log.Info("starting a follow-up run failed; the thread's next run takes its messages", "thread", thread, "err", err)
		return last
	}
	for _, en := range ens {
		if err := ib.MarkRun(ctx, thread, en.Seq, runID); err != nil {
			s.log.Warn("recording a follow-up's run failed", "thread", thread, "entry", en.Seq, "err", err)
		}
	}
	return last
}

// pendingEntries lists the thread's entries after its head's cursor that
// no run takes: none was made of them, or the one made of them ended
// (or is ending: ending) without taking them.
func (s *Service) pendingEntries(ctx context.Context, ib *store.Inbox, thread, ending string) ([]store.InboxEntry, error) {
	var after int64
	for cp, err := range s.store.History(ctx, store.HistoryRequest{Thread: thread, Limit: 1}) {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil && cp.Meta.Usage != nil {
			after = cp.Meta.Usage.Inbox
		}
		break
	}
	ens, err := ib.Entries(ctx, thread, after)
	if err != nil {
		return nil, err
	}
	takes := map[string]bool{} // run → it is pending or running
	for _, en := range ens {
		if _, seen := takes[en.Run]; en.Run == "" || en.Run == ending || seen {
			continue
		}
		rec, err := s.runlog.Run(ctx, en.Run)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		takes[en.Run] = err == nil && !Terminal(rec.Status)
	}
	return slices.DeleteFunc(ens, func(en store.InboxEntry) bool { return takes[en.Run] }), nil
}

// followUpRun is the run that takes the thread's pending entries: its
// oldest pending run, or a new one of the assistant queued behind the
// thread's runs.
func (s *Service) followUpRun(ctx context.Context, tenant, thread, assistantID string) (string, error) {
	recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: thread, Status: []string{StatusPending}})
	if err != nil {
		return "", err
	}
	if n := len(recs); n > 0 {
		return recs[n-1].ID, nil // newest first
	}
	input := json.RawMessage(`{}`)
	if a, ok := s.assistants[assistantID]; ok && a.Info().Kind == "chat" {
		input = json.RawMessage(`{"messages": []}`)
	}
	lr, err := s.Create(WithTenant(ctx, tenant), APIThreadID(thread), Request{AssistantID: assistantID, Input: input, MultitaskStrategy: "enqueue"})
	if err != nil {
		return "", err
	}
	return lr.Record().ID, nil
}

// followUpsLate starts the follow-ups of entries accepted after a run's
// end read the inbox (seen, the last entry number it read) but while
// its thread was still busy, once the thread is idle: the sender saw
// the thread busy and left them for the run, which had read its inbox.
func (s *Service) followUpsLate(ctx context.Context, tenant, thread, assistantID string, seen int64) {
	ib := s.inbox()
	if ib == nil {
		return
	}
	if last, err := ib.Last(ctx, thread); err == nil && last > seen {
		s.startFollowUps(ctx, tenant, thread, assistantID, "")
	}
}

// StartFollowUps starts a run of thread id's pending inbox entries when
// no run of the thread is pending or running (a follow-up sent to an
// idle thread starts at once; one sent while a run runs waits for its
// end, when the service starts it itself).
func (s *Service) StartFollowUps(ctx context.Context, id string) error {
	th, err := s.Thread(ctx, id)
	if err != nil {
		return err
	}
	if s.Busy(ctx, th.ID) {
		return nil
	}
	a, err := s.ThreadAssistant(ctx, th)
	if err != nil {
		return err
	}
	s.startFollowUps(ctx, TenantOf(ctx), th.ID, a.Info().ID, "")
	return nil
}
