package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// inbox gives the new run the messages the recorded thread's inbox gave
// its run, each at the step that took it (flow.Inbox): before the step
// standing for recorded checkpoint c, the entries up to the highest one
// c's step took at its start — c's cursor (Meta.Usage.Inbox), less those
// its tool loops took before later model calls, which the tape gives
// them from their journal entries (agent's "steer/<round>"). Every entry
// is shown as a steer: when it was taken is what the recording says, not
// its kind. Only the root namespace takes steering.
type inbox struct {
	tp      *tape
	rec     chain
	entries []store.InboxEntry
}

// recordedEntries reads the recorded thread's inbox, every entry shown as
// a steer (none when its store keeps none, or a prune trimmed it: the
// replay then departs where a step took a message).
func recordedEntries(ctx context.Context, s store.Store, thread string) ([]store.InboxEntry, error) {
	src, err := store.InboxOf(s)
	if err != nil {
		return nil, nil
	}
	ens, err := src.Entries(ctx, thread, 0)
	if err != nil {
		return nil, fmt.Errorf("replay: the inbox of thread %q: %w", thread, err)
	}
	for i := range ens {
		ens[i].Kind, ens[i].Run = store.InboxSteer, ""
	}
	return ens, nil
}

// Last implements flow.Inbox: the highest entry the next step may take.
func (ib *inbox) Last(ctx context.Context, _ string) (int64, error) {
	return ib.limit(ctx)
}

// Entries implements flow.Inbox: the entries after after the next step
// may take.
func (ib *inbox) Entries(ctx context.Context, _ string, after int64) ([]store.InboxEntry, error) {
	lim, err := ib.limit(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.InboxEntry
	for _, en := range ib.entries {
		if en.Seq > after && en.Seq <= lim {
			out = append(out, en)
		}
	}
	return out, nil
}

// steerRound ends the name of a loop's journal entry of what it took.
var steerRound = regexp.MustCompile(`/steer/[0-9]+$`)

// limit is the highest entry the recorded step after the new thread's
// head took at its start (0 where none stands for it).
func (ib *inbox) limit(ctx context.Context) (int64, error) {
	if ib.tp.ns != "" || len(ib.entries) == 0 {
		return 0, nil
	}
	var head int64
	for cp, err := range ib.tp.dst.History(ctx, store.HistoryRequest{Thread: ib.tp.newThread, Limit: 1}) {
		if err != nil {
			return 0, err
		}
		head = cp.Seq
	}
	recSeq := ib.tp.recordedSeq("", head)
	pos := slices.IndexFunc(ib.rec, func(cp store.Checkpoint) bool { return cp.Seq == recSeq })
	if pos < 0 || pos+1 >= len(ib.rec) {
		return 0, nil
	}
	lim := cursor(ib.rec[pos+1])
	ws, err := ib.tp.recordedWrites(ctx, "", recSeq)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		if !strings.HasPrefix(w.Task, "journal/") || !steerRound.MatchString(w.Task) {
			continue
		}
		var e struct {
			UpTo     int64             `json:"up_to"`
			Messages []json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(w.Update, &e) == nil && e.UpTo > 0 {
			lim = min(lim, e.UpTo-int64(len(e.Messages)))
		}
	}
	return lim, nil
}

// cursor is the highest inbox entry a checkpoint's lineage consumed.
func cursor(cp store.Checkpoint) int64 {
	if cp.Meta.Usage == nil {
		return 0
	}
	return cp.Meta.Usage.Inbox
}
