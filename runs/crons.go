package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/store"
)

// Cron is a cron job as the API shows it (LangGraph's Cron): a schedule
// on which runs of an assistant are made, on a thread (each tick a run on
// it) or stateless (each tick a run on a new thread).
type Cron struct {
	CronID         string         `json:"cron_id"`
	AssistantID    string         `json:"assistant_id"`
	ThreadID       *string        `json:"thread_id"`
	OnRunCompleted *string        `json:"on_run_completed"`
	EndTime        *string        `json:"end_time"`
	Schedule       string         `json:"schedule"`
	Timezone       *string        `json:"timezone"`
	CreatedAt      string         `json:"created_at"`
	UpdatedAt      string         `json:"updated_at"`
	Payload        map[string]any `json:"payload"`
	UserID         *string        `json:"user_id"`
	NextRunDate    *string        `json:"next_run_date"`
	Metadata       map[string]any `json:"metadata"`
	Enabled        bool           `json:"enabled"`
}

// CronPayload is what each of a cron's runs is made from: the fields of a
// run request a cron keeps.
type CronPayload struct {
	AssistantID       string          `json:"assistant_id"`
	Input             json.RawMessage `json:"input,omitempty"`
	Config            *RunConfig      `json:"config,omitempty"`
	Context           json.RawMessage `json:"context,omitempty"`
	Metadata          map[string]any  `json:"metadata,omitempty"`
	Webhook           json.RawMessage `json:"webhook,omitempty"`
	MultitaskStrategy string          `json:"multitask_strategy,omitempty"`
	InterruptBefore   StringList      `json:"interrupt_before,omitempty"`
	InterruptAfter    StringList      `json:"interrupt_after,omitempty"`
	StreamMode        StringList      `json:"stream_mode,omitempty"`
	StreamSubgraphs   bool            `json:"stream_subgraphs,omitempty"`
	StreamResumable   bool            `json:"stream_resumable,omitempty"`
	Durability        string          `json:"durability,omitempty"`
	CheckpointDuring  *bool           `json:"checkpoint_during,omitempty"`
}

// CronCreate is the body of POST /runs/crons and POST
// /threads/{thread_id}/runs/crons: a schedule and the run to make at
// each tick.
type CronCreate struct {
	Schedule string `json:"schedule"`
	// Timezone is an IANA time zone the schedule is read in (UTC).
	Timezone string `json:"timezone"`
	// EndTime (RFC 3339) ends the cron: no tick after it runs.
	EndTime string `json:"end_time"`
	Enabled *bool  `json:"enabled"`
	// OnRunCompleted: a stateless cron's threads are deleted when their
	// run ends ("delete", the default) or kept ("keep").
	OnRunCompleted    string          `json:"on_run_completed"`
	AssistantID       string          `json:"assistant_id"`
	Input             json.RawMessage `json:"input"`
	Config            *RunConfig      `json:"config"`
	Context           json.RawMessage `json:"context"`
	Metadata          map[string]any  `json:"metadata"`
	Webhook           json.RawMessage `json:"webhook"`
	MultitaskStrategy string          `json:"multitask_strategy"`
	InterruptBefore   StringList      `json:"interrupt_before"`
	InterruptAfter    StringList      `json:"interrupt_after"`
	StreamMode        StringList      `json:"stream_mode"`
	StreamSubgraphs   bool            `json:"stream_subgraphs"`
	StreamResumable   bool            `json:"stream_resumable"`
	Durability        string          `json:"durability"`
	CheckpointDuring  *bool           `json:"checkpoint_during"`
}

// CronPatch is the body of PATCH /runs/crons/{cron_id}: the fields given
// replace the cron's (metadata is merged into its; end_time null clears
// it).
type CronPatch struct {
	Schedule        *string         `json:"schedule"`
	Timezone        *string         `json:"timezone"`
	EndTime         json.RawMessage `json:"end_time"`
	Enabled         *bool           `json:"enabled"`
	IsEnabled       *bool           `json:"is_enabled"`
	OnRunCompleted  *string         `json:"on_run_completed"`
	Input           json.RawMessage `json:"input"`
	Config          *RunConfig      `json:"config"`
	Context         json.RawMessage `json:"context"`
	Metadata        map[string]any  `json:"metadata"`
	Webhook         json.RawMessage `json:"webhook"`
	InterruptBefore *StringList     `json:"interrupt_before"`
	InterruptAfter  *StringList     `json:"interrupt_after"`
	StreamMode      *StringList     `json:"stream_mode"`
	StreamSubgraphs *bool           `json:"stream_subgraphs"`
	StreamResumable *bool           `json:"stream_resumable"`
	Durability      *string         `json:"durability"`
}

// cronRecord is a cron as the store keeps it (an item of cronTenant).
// From is when its schedule was last set (made, changed, enabled): it
// runs the ticks after it.
type cronRecord struct {
	ID             string         `json:"cron_id"`
	Tenant         string         `json:"tenant"`
	ThreadID       string         `json:"thread_id,omitempty"`
	AssistantID    string         `json:"assistant_id"`
	Schedule       string         `json:"schedule"`
	Timezone       string         `json:"timezone,omitempty"`
	EndTime        string         `json:"end_time,omitempty"`
	Enabled        bool           `json:"enabled"`
	OnRunCompleted string         `json:"on_run_completed,omitempty"`
	Payload        CronPayload    `json:"payload"`
	Metadata       map[string]any `json:"metadata"`
	CreatedAt      string         `json:"created_at"`
	UpdatedAt      string         `json:"updated_at"`
	From           int64          `json:"from"`
}

// ErrNoItems: the store keeps no items, where crons are kept.
var errNoItems = newError(ErrState, "this store keeps no items, where crons are kept")

// payload is the run a create asks for at each tick.
func (q CronCreate) payload() CronPayload {
	return CronPayload{AssistantID: q.AssistantID, Input: q.Input, Config: q.Config, Context: q.Context, Metadata: q.Metadata, Webhook: q.Webhook,
		MultitaskStrategy: q.MultitaskStrategy, InterruptBefore: q.InterruptBefore, InterruptAfter: q.InterruptAfter, StreamMode: q.StreamMode,
		StreamSubgraphs: q.StreamSubgraphs, StreamResumable: q.StreamResumable, Durability: q.Durability, CheckpointDuring: q.CheckpointDuring}
}

// request is the run request of a tick of a cron with this payload.
func (p CronPayload) request() Request {
	return Request{AssistantID: p.AssistantID, Input: p.Input, Config: p.Config, Context: p.Context, Metadata: maps.Clone(p.Metadata), Webhook: p.Webhook,
		MultitaskStrategy: cmp.Or(p.MultitaskStrategy, "enqueue"), InterruptBefore: p.InterruptBefore, InterruptAfter: p.InterruptAfter,
		StreamMode: p.StreamMode, StreamSubgraphs: p.StreamSubgraphs, StreamResumable: p.StreamResumable, Durability: p.Durability, CheckpointDuring: p.CheckpointDuring}
}

// checkCron checks a cron before anything is stored: its schedule, time
// zone and end, and its payload as a run request of its assistant (and
// thread) would be checked.
func (s *Service) checkCron(ctx context.Context, c *cronRecord) error {
	if _, err := parseCronSpec(c.Schedule, c.Timezone); err != nil {
		return err
	}
	if c.EndTime != "" {
		t, err := time.Parse(time.RFC3339Nano, c.EndTime)
		if err != nil {
			return invalid("$.end_time", "%q: want an RFC 3339 time (2030-01-02T15:04:05Z)", c.EndTime)
		}
		c.EndTime = APITime(t)
	}
	if err := OneOf("$.on_run_completed", c.OnRunCompleted, "delete", "keep"); err != nil {
		return err
	}
	if c.ThreadID != "" && c.OnRunCompleted != "" {
		return invalid("$.on_run_completed", "only a stateless cron (POST /runs/crons) makes threads to delete or keep")
	}
	if err := OneOf("$.multitask_strategy", c.Payload.MultitaskStrategy, "reject", "interrupt", "rollback", "enqueue"); err != nil {
		return err
	}
	q := c.Payload.request()
	if _, _, _, err := q.check(ctx, s); err != nil {
		return err
	}
	if c.ThreadID != "" {
		if _, err := s.Thread(ctx, c.ThreadID); err != nil {
			return err
		}
	}
	return nil
}

// CreateCron makes a cron: on a thread (threadID), or stateless ("").
// Everything is checked before it is stored.
func (s *Service) CreateCron(ctx context.Context, threadID string, q CronCreate) (Cron, error) {
	if s.registry.items == nil {
		return Cron{}, errNoItems
	}
	now := s.cronNow()
	c := cronRecord{ID: uuid.NewString(), Tenant: TenantOf(ctx), ThreadID: threadID, AssistantID: q.AssistantID, Schedule: q.Schedule, Timezone: q.Timezone,
		EndTime: q.EndTime, Enabled: q.Enabled == nil || *q.Enabled, OnRunCompleted: q.OnRunCompleted, Payload: q.payload(), Metadata: emptyIfNil(q.Metadata),
		CreatedAt: APITime(now), UpdatedAt: APITime(now), From: now.UnixNano()}
	if threadID == "" && c.OnRunCompleted == "" {
		c.OnRunCompleted = "delete"
	}
	if err := s.checkCron(ctx, &c); err != nil {
		return Cron{}, err
	}
	if err := s.crons().put(ctx, c); err != nil {
		return Cron{}, err
	}
	return s.crons().view(ctx, c, now)
}

// cron reads a cron of the caller's tenant: ErrNotFound for another's.
func (s *Service) cron(ctx context.Context, id string) (cronRecord, error) {
	if s.registry.items == nil {
		return cronRecord{}, errNoItems
	}
	c, err := s.crons().get(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.Tenant != TenantOf(ctx)) {
		return cronRecord{}, newError(ErrNotFound, "cron %q not found", id)
	}
	return c, err
}

// GetCron returns a cron of the caller's tenant.
func (s *Service) GetCron(ctx context.Context, id string) (Cron, error) {
	c, err := s.cron(ctx, id)
	if err != nil {
		return Cron{}, err
	}
	return s.crons().view(ctx, c, s.cronNow())
}

// DeleteCron deletes a cron: it makes no more runs.
func (s *Service) DeleteCron(ctx context.Context, id string) error {
	c, err := s.cron(ctx, id)
	if err != nil {
		return err
	}
	return s.crons().remove(ctx, c.ID)
}

// PatchCron changes a cron. A new schedule, time zone or enabling runs
// the ticks after the change, not those before it.
func (s *Service) PatchCron(ctx context.Context, id string, p CronPatch) (Cron, error) {
	c, err := s.cron(ctx, id)
	if err != nil {
		return Cron{}, err
	}
	now := s.cronNow()
	if err := c.patch(p, now); err != nil {
		return Cron{}, err
	}
	if err := s.checkCron(ctx, &c); err != nil {
		return Cron{}, err
	}
	c.UpdatedAt = APITime(now)
	if err := s.crons().put(ctx, c); err != nil {
		return Cron{}, err
	}
	return s.crons().view(ctx, c, now)
}

func (c *cronRecord) patch(p CronPatch, now time.Time) error {
	if p.Schedule != nil && *p.Schedule != c.Schedule {
		c.Schedule, c.From = *p.Schedule, now.UnixNano()
	}
	if p.Timezone != nil && *p.Timezone != c.Timezone {
		c.Timezone, c.From = *p.Timezone, now.UnixNano()
	}
	if e := cmp.Or(p.Enabled, p.IsEnabled); e != nil {
		if *e && !c.Enabled {
			c.From = now.UnixNano()
		}
		c.Enabled = *e
	}
	if p.EndTime != nil {
		var end *string
		if err := json.Unmarshal(p.EndTime, &end); err != nil {
			return invalid("$.end_time", "want an RFC 3339 time or null")
		}
		c.EndTime = ""
		if end != nil {
			c.EndTime = *end
		}
	}
	if p.OnRunCompleted != nil {
		c.OnRunCompleted = *p.OnRunCompleted
	}
	c.Metadata = merged(c.Metadata, p.Metadata)
	c.Payload.patch(p)
	return nil
}

func (pl *CronPayload) patch(p CronPatch) {
	if p.Input != nil {
		pl.Input = p.Input
	}
	if p.Config != nil {
		pl.Config = p.Config
	}
	if p.Context != nil {
		pl.Context = p.Context
	}
	if p.Metadata != nil {
		pl.Metadata = merged(pl.Metadata, p.Metadata)
	}
	if p.Webhook != nil {
		pl.Webhook = p.Webhook
	}
	for _, f := range []struct {
		to   *StringList
		from *StringList
	}{{&pl.InterruptBefore, p.InterruptBefore}, {&pl.InterruptAfter, p.InterruptAfter}, {&pl.StreamMode, p.StreamMode}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if p.StreamSubgraphs != nil {
		pl.StreamSubgraphs = *p.StreamSubgraphs
	}
	if p.StreamResumable != nil {
		pl.StreamResumable = *p.StreamResumable
	}
	if p.Durability != nil {
		pl.Durability = *p.Durability
	}
}

// CronSearch is the body of POST /runs/crons/search and /count.
type CronSearch struct {
	AssistantID string         `json:"assistant_id"`
	ThreadID    string         `json:"thread_id"`
	Enabled     *bool          `json:"enabled"`
	Metadata    map[string]any `json:"metadata"`
	Limit       *int           `json:"limit"`
	Offset      int            `json:"offset"`
	SortBy      string         `json:"sort_by"`
	SortOrder   string         `json:"sort_order"`
	Select      []string       `json:"select"`
}

// SearchCrons lists the caller's crons that match, sorted (created_at,
// newest first, by default), and how many match in all.
func (s *Service) SearchCrons(ctx context.Context, q CronSearch) ([]Cron, int, error) {
	if err := q.check(); err != nil {
		return nil, 0, err
	}
	if s.registry.items == nil {
		return nil, 0, errNoItems
	}
	filter := map[string]any{"tenant": TenantOf(ctx)}
	if q.AssistantID != "" {
		filter["assistant_id"] = q.AssistantID
	}
	if q.ThreadID != "" {
		filter["thread_id"] = q.ThreadID
	}
	if q.Enabled != nil {
		filter["enabled"] = *q.Enabled
	}
	if len(q.Metadata) > 0 {
		filter["metadata"] = q.Metadata
	}
	all, err := s.crons().list(ctx, filter)
	if err != nil {
		return nil, 0, err
	}
	now := s.cronNow()
	out := make([]Cron, 0, len(all))
	for _, c := range all {
		v, err := s.crons().view(ctx, c, now)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, v)
	}
	sortCrons(out, q.SortBy, q.SortOrder)
	total := len(out)
	out = out[min(q.Offset, total):]
	if q.Limit != nil && *q.Limit < len(out) {
		out = out[:*q.Limit]
	}
	return out, total, nil
}

func (q CronSearch) check() error {
	for _, e := range []error{
		OneOf("$.sort_by", q.SortBy, "cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"),
		OneOf("$.sort_order", q.SortOrder, "asc", "desc"),
	} {
		if e != nil {
			return e
		}
	}
	if q.Limit != nil && (*q.Limit < 0 || *q.Limit > 1000) {
		return invalid("$.limit", "%d: want 0 to 1000", *q.Limit)
	}
	if q.Offset < 0 {
		return invalid("$.offset", "%d must not be negative", q.Offset)
	}
	return nil
}

// cronViewOf is the API's view of a cron whose next tick is next (zero:
// none).
func cronViewOf(c cronRecord, next time.Time) Cron {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	v := Cron{CronID: c.ID, AssistantID: c.AssistantID, ThreadID: opt(c.ThreadID), OnRunCompleted: opt(c.OnRunCompleted), EndTime: opt(c.EndTime),
		Schedule: c.Schedule, Timezone: opt(c.Timezone), CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Payload: mustObject(c.Payload),
		UserID: opt(c.Tenant), Metadata: emptyIfNil(c.Metadata), Enabled: c.Enabled}
	if !next.IsZero() {
		v.NextRunDate = opt(APITime(next))
	}
	return v
}

// cronOf reads a cron's item.
func cronOf(it store.Item) (cronRecord, error) {
	var c cronRecord
	b, err := json.Marshal(it.Value)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID == "" {
		return c, fmt.Errorf("%w: cron %q: %v", store.ErrCorrupt, it.Key, err)
	}
	return c, nil
}
