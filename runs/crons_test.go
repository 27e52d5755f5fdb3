package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// cronClock is a clock tests move by hand, shared by services.
type cronClock struct{ ns atomic.Int64 }

func (c *cronClock) now() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *cronClock) set(t time.Time)        { c.ns.Store(t.UnixNano()) }
func (c *cronClock) add(d time.Duration)    { c.ns.Add(int64(d)) }
func newCronClock(t time.Time) *cronClock   { c := &cronClock{}; c.set(t); return c }
func cronT0() time.Time                     { return time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC) }
func cronCtx(tenant string) context.Context { return WithTenant(context.Background(), tenant) }
func cronInput() json.RawMessage            { return json.RawMessage(`{"x": 1}`) }
func cronPtr[T any](v T) *T                 { return &v }
func cronGraphNode(context.Context, state.Doc) (state.Update, error) {
	return state.Update{"x": 2}, nil
}

// cronServices opens n services on one SQLite file, as n processes of a
// deployment, on one clock; their schedulers are driven by hand
// (cronSweep).
func cronServices(t *testing.T, n int, clock *cronClock) []*Service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crons.db")
	g, err := flow.NewGraph(state.MustSchema(state.WithField("x", state.ReducerReplace))).
		AddNode("n", cronGraphNode).AddEdge(flow.START, "n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	var out []*Service
	for range n {
		st, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(Config{Store: st, Assistants: []Assistant{&Graph{ID: "g", Graph: g}}, Now: clock.now, CronTick: -1, CronClaimTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = svc.Close(ctx)
			_ = st.Close()
		})
		out = append(out, svc)
	}
	return out
}

// cronTicks lists the ticks (cron_tick) of a cron's runs, of every
// thread of the tenant's, with how many runs each has.
func cronTicks(t *testing.T, svc *Service, cronID string) map[string]int {
	t.Helper()
	recs, err := svc.runlog.Runs(context.Background(), store.RunQuery{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		d, err := DataOf(r)
		if err != nil {
			t.Fatal(err)
		}
		if d.Metadata["cron_id"] == cronID {
			out[d.Metadata["cron_tick"].(string)]++
		}
	}
	return out
}

func newThread(t *testing.T, svc *Service, tenant, id string) {
	t.Helper()
	if _, err := svc.store.CreateThread(cronCtx(tenant), store.Thread{ID: store.ThreadKey(tenant, id), Tenant: tenant}); err != nil {
		t.Fatal(err)
	}
}

// TestCronOncePerTick: three services sweep at once at every minute of a
// thread cron's schedule; each tick makes one run, none twice, none lost.
func TestCronOncePerTick(t *testing.T) {
	clock := newCronClock(cronT0())
	svcs := cronServices(t, 3, clock)
	newThread(t, svcs[0], "", "th")
	c, err := svcs[0].CreateCron(cronCtx(""), "th", CronCreate{AssistantID: "g", Schedule: "* * * * *", Input: cronInput()})
	if err != nil {
		t.Fatal(err)
	}
	if c.NextRunDate == nil || *c.NextRunDate != "2030-01-01T12:01:00.000000Z" || *c.ThreadID != "th" {
		t.Fatalf("made %+v", c)
	}
	const minutes = 6
	for range minutes {
		clock.add(time.Minute)
		var wg sync.WaitGroup
		for _, s := range svcs {
			wg.Go(func() { s.cronSweep(context.Background()) })
		}
		wg.Wait()
	}
	got := cronTicks(t, svcs[0], c.CronID)
	if len(got) != minutes {
		t.Fatalf("%d ticks ran, want %d: %v", len(got), minutes, got)
	}
	for i := 1; i <= minutes; i++ {
		tick := APITime(time.Date(2030, 1, 1, 12, i, 0, 0, time.UTC))
		if got[tick] != 1 {
			t.Fatalf("tick %s ran %d times: %v", tick, got[tick], got)
		}
	}
	v, err := svcs[1].GetCron(cronCtx(""), c.CronID)
	if err != nil || *v.NextRunDate != "2030-01-01T12:07:00.000000Z" {
		t.Fatalf("next run after the sweeps: %v %v", v.NextRunDate, err)
	}
}

// TestCronCatchUp: of the ticks missed while no server ran, one runs, the
// latest; a disabled or ended cron runs none, and one enabled again runs
// the ticks after, not those it missed disabled.
func TestCronCatchUp(t *testing.T) {
	clock := newCronClock(cronT0())
	svc := cronServices(t, 1, clock)[0]
	ctx := cronCtx("")
	mk := func(q CronCreate) Cron {
		t.Helper()
		q.AssistantID, q.Input = "g", cronInput()
		q.OnRunCompleted = cmp.Or(q.OnRunCompleted, "keep")
		c, err := svc.CreateCron(ctx, "", q)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	every := mk(CronCreate{Schedule: "*/5 * * * *"})
	gone := mk(CronCreate{Schedule: "*/5 * * * *", OnRunCompleted: "delete"})
	off := mk(CronCreate{Schedule: "* * * * *", Enabled: cronPtr(false)})
	ended := mk(CronCreate{Schedule: "* * * * *", EndTime: "2030-01-01T12:02:10Z"})
	clock.add(32 * time.Minute) // 12:32:30: ticks 12:05 … 12:30 missed
	svc.cronSweep(ctx)
	svc.cronSweep(ctx)
	for _, tc := range []struct {
		name string
		id   string
		want map[string]int
	}{
		{"the latest missed tick", every.CronID, map[string]int{"2030-01-01T12:30:00.000000Z": 1}},
		{"disabled", off.CronID, map[string]int{}},
		{"ended: its last tick before the end", ended.CronID, map[string]int{"2030-01-01T12:02:00.000000Z": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cronTicks(t, svc, tc.id); !equalCounts(got, tc.want) {
				t.Fatalf("ticks %v, want %v", got, tc.want)
			}
		})
	}
	// on_run_completed delete: the tick's thread goes when its run ends.
	th := store.ThreadKey("", cronID(gone.CronID, time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC), "thread"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := svc.store.Thread(ctx, th); errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the thread of a stateless cron's run was not deleted")
		}
	}
	if _, err := svc.PatchCron(ctx, off.CronID, CronPatch{Enabled: cronPtr(true)}); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	svc.cronSweep(ctx)
	if got := cronTicks(t, svc, off.CronID); !equalCounts(got, map[string]int{"2030-01-01T12:33:00.000000Z": 1}) {
		t.Fatalf("enabled again: ticks %v", got)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCronTakeover: a process claims a tick and dies before it makes the
// run. Another does not make it while the claim is fresh, makes it once
// the claim is older than the timeout, and never twice.
func TestCronTakeover(t *testing.T) {
	clock := newCronClock(cronT0())
	svcs := cronServices(t, 2, clock)
	ctx := cronCtx("")
	newThread(t, svcs[0], "", "th")
	c, rec, tick := claimedTick(t, svcs[0], clock, "th")
	// svcs[0] "dies" here.
	svcs[1].cronSweep(ctx)
	if got := cronTicks(t, svcs[1], c.CronID); len(got) != 0 {
		t.Fatalf("a fresh claim was taken over: %v", got)
	}
	clock.add(time.Minute + time.Second) // the claim is stale; 12:02 is due too
	svcs[1].cronSweep(ctx)
	svcs[1].cronSweep(ctx)
	want := map[string]int{APITime(tick): 1, "2030-01-01T12:02:00.000000Z": 1}
	if got := cronTicks(t, svcs[1], c.CronID); !equalCounts(got, want) {
		t.Fatalf("ticks %v, want %v", got, want)
	}
	if _, err := svcs[1].runlog.Run(ctx, cronID(c.CronID, tick, "run")); err != nil {
		t.Fatalf("the taken over tick's run has not its derived id: %v", err)
	}
	// A takeover that finds the run made (the dead process made it, then
	// died) makes none.
	if _, err := svcs[1].cronRun(ctx, rec, tick); err != nil {
		t.Fatal(err)
	}
	if got := cronTicks(t, svcs[1], c.CronID); !equalCounts(got, want) {
		t.Fatalf("made again: ticks %v", got)
	}
}

// TestCronInvalid: a bad field is a 422 naming it, an unknown assistant
// or thread a 404, and nothing is stored.
func TestCronInvalid(t *testing.T) {
	svc := cronServices(t, 1, newCronClock(cronT0()))[0]
	ctx := cronCtx("")
	newThread(t, svc, "", "th")
	ok := func(mod func(*CronCreate)) CronCreate {
		q := CronCreate{AssistantID: "g", Schedule: "0 9 * * 1-5", Input: cronInput()}
		mod(&q)
		return q
	}
	for _, tc := range []struct {
		name   string
		thread string
		q      CronCreate
		path   string
		kind   error
	}{
		{"no schedule", "", ok(func(q *CronCreate) { q.Schedule = "" }), "$.schedule", ErrInvalidInput},
		{"six fields", "", ok(func(q *CronCreate) { q.Schedule = "0 * * * * *" }), "$.schedule", ErrInvalidInput},
		{"a bad minute", "", ok(func(q *CronCreate) { q.Schedule = "61 * * * *" }), "$.schedule", ErrInvalidInput},
		{"@every", "", ok(func(q *CronCreate) { q.Schedule = "@every 1m" }), "$.schedule", ErrInvalidInput},
		{"a zone in the schedule", "", ok(func(q *CronCreate) { q.Schedule = "CRON_TZ=UTC * * * * *" }), "$.schedule", ErrInvalidInput},
		{"an unknown zone", "", ok(func(q *CronCreate) { q.Timezone = "Mars/Olympus" }), "$.timezone", ErrInvalidInput},
		{"a bad end", "", ok(func(q *CronCreate) { q.EndTime = "tomorrow" }), "$.end_time", ErrInvalidInput},
		{"on_run_completed", "", ok(func(q *CronCreate) { q.OnRunCompleted = "archive" }), "$.on_run_completed", ErrInvalidInput},
		{"on_run_completed on a thread", "th", ok(func(q *CronCreate) { q.OnRunCompleted = "keep" }), "$.on_run_completed", ErrInvalidInput},
		{"multitask_strategy", "", ok(func(q *CronCreate) { q.MultitaskStrategy = "twice" }), "$.multitask_strategy", ErrInvalidInput},
		{"stream_mode", "", ok(func(q *CronCreate) { q.StreamMode = StringList{"values", "nope"} }), "$.stream_mode[1]", ErrInvalidInput},
		{"context", "", ok(func(q *CronCreate) { q.Context = json.RawMessage(`[1]`) }), "$.context", ErrInvalidInput},
		{"webhook", "", ok(func(q *CronCreate) { q.Webhook = json.RawMessage(`"ftp://x/y"`) }), "$.webhook", ErrInvalidInput},
		{"no assistant", "", ok(func(q *CronCreate) { q.AssistantID = "" }), "$.assistant_id", ErrInvalidInput},
		{"an unknown assistant", "", ok(func(q *CronCreate) { q.AssistantID = "nope" }), "", ErrNotFound},
		{"an unknown thread", "nope", ok(func(*CronCreate) {}), "", ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.CreateCron(ctx, tc.thread, tc.q)
			var e *Error
			if !errors.Is(err, tc.kind) || (tc.path != "" && (!errors.As(err, &e) || e.Path != tc.path)) {
				t.Fatalf("got %v, want %v at %q", err, tc.kind, tc.path)
			}
		})
	}
	if _, n, err := svc.SearchCrons(ctx, CronSearch{}); n != 0 || err != nil {
		t.Fatalf("%d crons stored (%v)", n, err)
	}
	c, err := svc.CreateCron(ctx, "", ok(func(q *CronCreate) { q.Timezone = "America/New_York" }))
	if err != nil {
		t.Fatal(err)
	}
	if *c.NextRunDate != "2030-01-01T14:00:00.000000Z" { // Tuesday 09:00 in New York (EST)
		t.Fatalf("next run %s", *c.NextRunDate)
	}
	if _, err := svc.PatchCron(ctx, c.CronID, CronPatch{Timezone: cronPtr("Nowhere/Zone")}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("patch to an unknown zone: %v", err)
	}
	if v, _ := svc.GetCron(ctx, c.CronID); *v.Timezone != "America/New_York" {
		t.Fatalf("a refused patch changed the cron: %v", *v.Timezone)
	}
}

// TestCronTenants: a tenant sees, changes and deletes its own crons only;
// another's id is not found.
func TestCronTenants(t *testing.T) {
	svc := cronServices(t, 1, newCronClock(cronT0()))[0]
	a, b := cronCtx("acme"), cronCtx("globex")
	c, err := svc.CreateCron(a, "", CronCreate{AssistantID: "g", Schedule: "@hourly", Input: cronInput(), Metadata: map[string]any{"team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if *c.UserID != "acme" {
		t.Fatalf("user_id %v", c.UserID)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := svc.GetCron(b, c.CronID); return err }},
		{"patch", func() error { _, err := svc.PatchCron(b, c.CronID, CronPatch{Enabled: cronPtr(false)}); return err }},
		{"delete", func() error { return svc.DeleteCron(b, c.CronID) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrNotFound) {
				t.Fatalf("another tenant's %s: %v", tc.name, err)
			}
		})
	}
	for _, tc := range []struct {
		ctx  context.Context
		q    CronSearch
		want int
	}{
		{a, CronSearch{}, 1}, {b, CronSearch{}, 0}, {a, CronSearch{Metadata: map[string]any{"team": "x"}}, 1},
		{a, CronSearch{Metadata: map[string]any{"team": "y"}}, 0}, {a, CronSearch{Enabled: cronPtr(false)}, 0}, {a, CronSearch{AssistantID: "g"}, 1},
	} {
		if _, n, err := svc.SearchCrons(tc.ctx, tc.q); n != tc.want || err != nil {
			t.Fatalf("search %s %+v: %d (%v), want %d", TenantOf(tc.ctx), tc.q, n, err, tc.want)
		}
	}
	if err := svc.DeleteCron(a, c.CronID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetCron(a, c.CronID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
}

// TestCronStatelessSettled: a stateless cron's run whose process dies
// after making it (before dropping the tick's pending entry) settles its
// tick when it ends, before its thread goes: no takeover makes it again.
func TestCronStatelessSettled(t *testing.T) {
	clock := newCronClock(cronT0())
	svcs := cronServices(t, 2, clock)
	ctx := cronCtx("")
	c, rec, tick := claimedTick(t, svcs[0], clock, "")
	if _, err := svcs[0].cronRun(ctx, rec, tick); err != nil { // made; the process "dies" before it is done
		t.Fatal(err)
	}
	run := cronID(c.CronID, tick, "run")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := svcs[0].runlog.Run(ctx, run); errors.Is(err, store.ErrNotFound) {
			break // ended, its thread deleted
		}
		if time.Now().After(deadline) {
			t.Fatal("the stateless run did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	items, err := svcs[1].crons().items.Search(ctx, store.SearchOp{Tenant: cronTenant, Prefix: pendingNS, Limit: 10, NoRefresh: true})
	if err != nil || len(items) != 0 {
		t.Fatalf("the ended run left its tick pending: %v %v", items, err)
	}
	if last, err := svcs[1].crons().last(ctx, c.CronID); err != nil || !last.Equal(tick) {
		t.Fatalf("the cron's latest tick: %v %v, want %v", last, err, tick)
	}
}

// claimedTick makes a cron of every minute on thread ("": stateless) and
// claims its tick of 12:01 after a minute, as a process about to make its
// run.
func claimedTick(t *testing.T, svc *Service, clock *cronClock, thread string) (Cron, cronRecord, time.Time) {
	t.Helper()
	ctx := cronCtx("")
	c, err := svc.CreateCron(ctx, thread, CronCreate{AssistantID: "g", Schedule: "* * * * *", Input: cronInput()})
	if err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	rec, err := svc.crons().get(ctx, c.CronID)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2030, 1, 1, 12, 1, 0, 0, time.UTC)
	if won, err := svc.crons().claim(ctx, rec, tick); !won || err != nil {
		t.Fatalf("claim: %v %v", won, err)
	}
	return c, rec, tick
}
