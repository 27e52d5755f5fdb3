package runs

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronSpec is a cron's schedule, read: a standard 5-field cron expression
// (or a descriptor such as @hourly) in an IANA time zone (UTC by default).
type cronSpec struct {
	sched cron.Schedule
	loc   *time.Location
}

// parseCronSpec reads a schedule and a time zone; an error names the
// field at fault ($.schedule, $.timezone).
func parseCronSpec(schedule, timezone string) (cronSpec, error) {
	s := strings.TrimSpace(schedule)
	switch {
	case s == "":
		return cronSpec{}, invalid("$.schedule", "required: a cron expression of 5 fields (minute hour day-of-month month day-of-week), e.g. \"*/5 * * * *\"")
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return cronSpec{}, invalid("$.schedule", "%q: name the time zone in timezone, not in the schedule", schedule)
	case strings.HasPrefix(s, "@every"):
		return cronSpec{}, invalid("$.schedule", "%q: @every is not a cron schedule; want 5 fields (minute hour day-of-month month day-of-week)", schedule)
	}
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return cronSpec{}, invalid("$.schedule", "%q: %v (want 5 fields: minute hour day-of-month month day-of-week)", schedule, err)
	}
	loc := time.UTC
	if timezone != "" {
		if loc, err = time.LoadLocation(timezone); err != nil || timezone == "Local" {
			return cronSpec{}, invalid("$.timezone", "%q is not an IANA time zone (e.g. \"America/New_York\", \"UTC\")", timezone)
		}
	}
	return cronSpec{sched: sched, loc: loc}, nil
}

// next is the schedule's first tick after t (zero when there is none
// within five years, as for "0 0 30 2 *").
func (c cronSpec) next(t time.Time) time.Time {
	n := c.sched.Next(t.In(c.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// catchUpWindows are how far back latest looks, widening: a tick in the
// last hour is found in at most 60 steps (a schedule of every minute), an
// older one only for a schedule with no tick in the narrower window.
var catchUpWindows = []time.Duration{time.Hour, 25 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour}

// latest is the schedule's last tick in (after, now]: the one tick a cron
// runs for all those it missed. ok is false when there is none.
func (c cronSpec) latest(after, now time.Time) (time.Time, bool) {
	if !now.After(after) {
		return time.Time{}, false
	}
	for _, back := range catchUpWindows {
		from := now.Add(-back)
		if from.Before(after) {
			from = after
		}
		t := c.next(from)
		if t.IsZero() || t.After(now) {
			if from.Equal(after) {
				return time.Time{}, false
			}
			continue
		}
		for {
			n := c.next(t)
			if n.IsZero() || n.After(now) {
				return t, true
			}
			t = n
		}
	}
	return time.Time{}, false
}
