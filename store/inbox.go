package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/store/driver"
)

// The kinds of inbox entry.
const (
	// InboxSteer is a message for the thread's running run, which takes it
	// at its next step boundary (the next model call of a chat or loop).
	InboxSteer = "steer"
	// InboxFollowUp is a message that starts a new run on the thread when
	// the current one ends.
	InboxFollowUp = "follow_up"
)

// InboxEntry is one message of a thread's inbox (Inbox). Seq numbers a
// thread's entries 1, 2, … in the order they were accepted.
type InboxEntry struct {
	Seq     int64           `json:"seq"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
	// CreatedAt is when the entry was accepted (Unix nanoseconds).
	CreatedAt int64 `json:"created_at"`
	// Run, on a follow-up (or a steer no step took before its run
	// ended), names the run it became once one was made of it.
	Run string `json:"run,omitempty"`
}

// ErrInboxEntry is the error of an entry that cannot be accepted: an
// unknown kind or a message that is not JSON.
var ErrInboxEntry = errors.New("store: bad inbox entry")

// Inbox keeps each thread's inbox: an append-only log of the messages
// sent to it while a run may be running (steering). An entry is consumed
// when a committed checkpoint records it: its Meta.Usage.Inbox, the
// highest entry its lineage consumed, is at least the entry's Seq. So
// whether an entry was taken is a fact of the checkpoints, committed with
// the step that took it, and a crash before that commit leaves it
// pending.
//
// Entries are kept as items of a system tenant (SystemTenant("inbox",
// the thread's tenant)), which no API key's tenant can name: sealed in an
// encrypted store, deleted with their thread (DeleteThread, and
// EmptyThread, which also empties the inbox), and trimmed by Trim.
type Inbox struct {
	b   driver.ItemBackend
	now func() int64
}

// InboxOf returns the inbox of a store whose backend keeps items (every
// built-in backend does); ErrInvalidArgument otherwise.
func InboxOf(s Store) (*Inbox, error) {
	if e, ok := s.(*Engine); ok {
		if ib := e.inbox(); ib != nil {
			return ib, nil
		}
	}
	return nil, fmt.Errorf("%w: this store keeps no inbox", ErrInvalidArgument)
}

// inbox is the engine's inbox, nil when its backend keeps no items.
func (e *Engine) inbox() *Inbox {
	b, ok := e.b.(driver.ItemBackend)
	if !ok {
		return nil
	}
	return &Inbox{b: sealedItems{ItemBackend: b, ring: e.crypt.ring}, now: func() int64 { return e.now().UnixNano() }}
}

// inboxNS is where a thread's entries are kept: the item tenant and
// namespace of thread key thread (ids may hold ".", labels cannot: they
// become "|", which ids cannot hold).
func inboxNS(thread string) (tenant, ns string) {
	t, id := SplitThreadKey(thread)
	return SystemTenant("inbox", t), "inbox." + strings.ReplaceAll(id, ".", "|")
}

func inboxKey(seq int64) string { return fmt.Sprintf("%020d", seq) }

// Append accepts an entry of kind (InboxSteer or InboxFollowUp) with
// message msg (JSON, already redacted: the store keeps it as given) and
// returns it numbered: one more than both the thread's last entry and
// after (the highest entry the thread's head records, so that a thread
// copied with its checkpoints but not its inbox never numbers an entry
// its checkpoints already count as consumed). Two Appends that race get
// different numbers.
func (ib *Inbox) Append(ctx context.Context, thread string, after int64, kind string, msg json.RawMessage) (InboxEntry, error) {
	if err := ValidateThreadID(thread); err != nil {
		return InboxEntry{}, err
	}
	if kind != InboxSteer && kind != InboxFollowUp {
		return InboxEntry{}, fmt.Errorf("%w: kind %q (want %q or %q)", ErrInboxEntry, kind, InboxSteer, InboxFollowUp)
	}
	if !json.Valid(msg) {
		return InboxEntry{}, fmt.Errorf("%w: the message is not JSON", ErrInboxEntry)
	}
	for range 64 {
		last, err := ib.Last(ctx, thread) // one key: Append keeps it with each entry
		if err != nil {
			return InboxEntry{}, err
		}
		en := InboxEntry{Seq: max(after, last) + 1, Kind: kind, Message: msg, CreatedAt: ib.now()}
		err = ib.put(ctx, thread, en, true)
		if !errors.Is(err, ErrConflict) {
			return en, err
		}
	}
	return InboxEntry{}, fmt.Errorf("%w: thread %q: too many entries accepted at once", ErrConflict, thread)
}

// put writes an entry; a new one (ifAbsent) with the thread's last
// number beside it, in one transaction (Last).
func (ib *Inbox) put(ctx context.Context, thread string, en InboxEntry, ifAbsent bool) error {
	tenant, ns := inboxNS(thread)
	v, err := json.Marshal(en)
	if err != nil {
		return err
	}
	now := ib.now()
	rows := []driver.ItemRow{{ItemKey: driver.ItemKey{Tenant: tenant, Namespace: ns, Key: inboxKey(en.Seq)}, Value: v, CreatedAt: en.CreatedAt, UpdatedAt: now, IfAbsent: ifAbsent}}
	if ifAbsent {
		last, _ := json.Marshal(map[string]int64{"seq": en.Seq}) // an int always marshals
		rows = append(rows, driver.ItemRow{ItemKey: driver.ItemKey{Tenant: tenant, Namespace: ns, Key: inboxLastKey}, Value: last, CreatedAt: now, UpdatedAt: now})
	}
	return ib.b.WriteItems(ctx, rows, nil)
}

// inboxLastKey keeps a thread's last entry number, so that the check a
// runner makes before each step is one key's read (Last).
const inboxLastKey = "last"

// Last returns the number of the thread's last entry (0: none): a runner
// reads it before each step, and the entries only when it is past the
// head's cursor.
func (ib *Inbox) Last(ctx context.Context, thread string) (int64, error) {
	if err := ValidateThreadID(thread); err != nil {
		return 0, err
	}
	tenant, ns := inboxNS(thread)
	rows, err := ib.b.GetItems(ctx, []driver.ItemKey{{Tenant: tenant, Namespace: ns, Key: inboxLastKey}}, ib.now())
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	var last struct {
		Seq int64 `json:"seq"`
	}
	if err := json.Unmarshal(rows[0].Value, &last); err != nil {
		return 0, &CorruptError{What: fmt.Sprintf("the inbox of thread %q", thread), Err: ErrCorrupt}
	}
	return last.Seq, nil
}

// MarkRun records that run was made of entry seq (a follow-up, or a
// steer left over when its run ended); ErrNotFound when there is no
// such entry.
func (ib *Inbox) MarkRun(ctx context.Context, thread string, seq int64, run string) error {
	all, err := ib.Entries(ctx, thread, seq-1)
	if err != nil {
		return err
	}
	if len(all) == 0 || all[0].Seq != seq {
		return fmt.Errorf("%w: inbox entry %d of thread %q", ErrNotFound, seq, thread)
	}
	en := all[0]
	en.Run = run
	return ib.put(ctx, thread, en, false)
}

// Entries returns the thread's entries numbered after after, in order.
func (ib *Inbox) Entries(ctx context.Context, thread string, after int64) ([]InboxEntry, error) {
	if err := ValidateThreadID(thread); err != nil {
		return nil, err
	}
	tenant, ns := inboxNS(thread)
	var out []InboxEntry
	for r, err := range ib.b.ScanItems(ctx, driver.ItemScan{Tenant: tenant, Prefix: ns, Now: ib.now()}) {
		if err != nil {
			return nil, err
		}
		if r.Namespace != ns || r.Key == inboxLastKey {
			continue
		}
		seq, perr := strconv.ParseInt(r.Key, 10, 64)
		var en InboxEntry
		if perr != nil || json.Unmarshal(r.Value, &en) != nil || en.Seq != seq {
			return nil, &CorruptError{What: fmt.Sprintf("inbox entry %q of thread %q", r.Key, thread), Err: ErrCorrupt}
		}
		if seq > after {
			out = append(out, en)
		}
	}
	slices.SortFunc(out, func(a, b InboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Trim deletes the thread's entries numbered up to upTo (those its
// checkpoints consumed; retention) and returns how many went.
func (ib *Inbox) Trim(ctx context.Context, thread string, upTo int64) (int64, error) {
	all, err := ib.Entries(ctx, thread, 0)
	if err != nil {
		return 0, err
	}
	tenant, ns := inboxNS(thread)
	var del []driver.ItemKey
	for _, en := range all {
		if en.Seq <= upTo {
			del = append(del, driver.ItemKey{Tenant: tenant, Namespace: ns, Key: inboxKey(en.Seq)})
		}
	}
	if len(del) == 0 {
		return 0, nil
	}
	return int64(len(del)), ib.b.WriteItems(ctx, nil, del)
}

// deleteInbox deletes every entry of a thread (DeleteThread, EmptyThread).
func (e *Engine) deleteInbox(ctx context.Context, thread string) error {
	ib := e.inbox()
	if ib == nil {
		return nil
	}
	if _, err := ib.Trim(ctx, thread, 1<<62); err != nil {
		return err
	}
	tenant, ns := inboxNS(thread)
	return ib.b.WriteItems(ctx, nil, []driver.ItemKey{{Tenant: tenant, Namespace: ns, Key: inboxLastKey}})
}

// trimInbox deletes, after a prune, the inbox entries every kept
// checkpoint of the thread's root namespace consumed: no branch left can
// take them again.
func (e *Engine) trimInbox(ctx context.Context, thread string) (int64, error) {
	ib := e.inbox()
	if ib == nil {
		return 0, nil
	}
	upTo := int64(-1)
	for cp, err := range e.History(ctx, HistoryRequest{Thread: thread}) {
		if errors.Is(err, ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		var c int64
		if cp.Meta.Usage != nil {
			c = cp.Meta.Usage.Inbox
		}
		if upTo < 0 || c < upTo {
			upTo = c
		}
		if upTo == 0 {
			return 0, nil
		}
	}
	if upTo <= 0 {
		return 0, nil
	}
	return ib.Trim(ctx, thread, upTo)
}
