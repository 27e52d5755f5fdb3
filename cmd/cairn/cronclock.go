package main

import (
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // crons' time zones (IANA) on machines without a zoneinfo database
)

// cronClockEnv, for tests only, runs the crons' clock fast: "B×S" (B unix
// seconds, S a speed) makes the crons' time B + (now − B)·S, so that
// processes given the same value agree, and a schedule of every minute
// ticks every 60/S seconds. Nothing else runs on it.
const cronClockEnv = "CAIRN_TEST_CRON_CLOCK"

// cronClock reads cronClockEnv (nil: the real clock).
func (a *app) cronClock() (func() time.Time, error) {
	v := a.getenv(cronClockEnv)
	if v == "" {
		return nil, nil
	}
	b, s, ok := strings.Cut(v, "x")
	base, err1 := strconv.ParseInt(b, 10, 64)
	speed, err2 := strconv.ParseFloat(s, 64)
	if !ok || err1 != nil || err2 != nil || speed <= 0 {
		return nil, usagef("%s %q: want <unix seconds>x<speed>", cronClockEnv, v)
	}
	t0 := time.Unix(base, 0)
	return func() time.Time {
		return t0.Add(time.Duration(float64(time.Since(t0)) * speed))
	}, nil
}
