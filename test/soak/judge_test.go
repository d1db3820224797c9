package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// build makes a series of n samples every step, valued f(i), in lifetime life(i).
func build(n int, step time.Duration, f func(i int) float64, life func(i int) int) *series {
	s := &series{name: "x"}
	for i := range n {
		s.add(t0.Add(time.Duration(i)*step), life(i), f(i))
	}
	return s
}

func one(int) int { return 0 }

func TestJudge(t *testing.T) {
	const n = 120 // ten minutes of 5 s ticks
	step := 5 * time.Second
	perHour := float64(time.Hour / step) // samples per hour
	cases := []struct {
		name      string
		s         *series
		pass      bool
		slope     float64 // per hour, within 1e-6 relative
		level     float64
		lifetimes int
	}{
		{"flat", build(n, step, func(int) float64 { return 100 }, one), true, 0, 100, 1},
		{"a goroutine per tick", build(n, step, func(i int) float64 { return 50 + float64(i) }, one), false, perHour, 50 + 59.5, 1},
		{"growth just under 2 % of the level per hour", build(n, step, func(i int) float64 { return 1000 + 19.9*float64(i)/perHour }, one), true, 19.9, 1000 + 19.9*59.5/perHour, 1},
		{"shrinking", build(n, step, func(i int) float64 { return 1000 - float64(i) }, one), true, -perHour, 1000 - 59.5, 1},
		{"outliers do not move the median slope", build(n, step, func(i int) float64 {
			if i%10 == 3 {
				return 1e6
			}
			return 100
		}, one), true, 0, 100, 1},
		// Each restart starts from the bottom: pairs across a restart would read as a fall.
		{"a leak reset by restarts is still a leak", build(n, step, func(i int) float64 { return 40 + float64(i%40) }, func(i int) int { return i / 40 }), false, perHour, 59.5, 3},
		{"a restart at a lower level is no growth", build(n, step, func(i int) float64 {
			if i < 60 {
				return 200
			}
			return 100
		}, func(i int) int { return i / 60 }), true, 0, 150, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := judge(c.s, t0)
			if v.pass != c.pass || !near(v.slope, c.slope) || !near(v.level, c.level) || v.lifetimes != c.lifetimes {
				t.Errorf("judge = pass %t, slope %g/h, level %g, %d lifetimes; want pass %t, slope %g/h, level %g, %d lifetimes",
					v.pass, v.slope, v.level, v.lifetimes, c.pass, c.slope, c.level, c.lifetimes)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// Only the samples from the start of the window count, and a series with too few fails.
func TestJudge_WindowAndTooFew(t *testing.T) {
	s := build(100, time.Second, func(i int) float64 {
		if i < 50 {
			return float64(i) * 1000 // a warm-up climb, before the window
		}
		return 7
	}, one)
	if v := judge(s, t0.Add(50*time.Second)); !v.pass || v.slope != 0 || v.level != 7 || v.n != 50 {
		t.Errorf("second half: %+v, want pass, slope 0, level 7, 50 samples", v)
	}
	if v := judge(s, t0.Add(95*time.Second)); v.pass || !v.tooFew {
		t.Errorf("5 samples: %+v, want a failure for too few", v)
	}
	if !strings.Contains(judge(s, t0.Add(95*time.Second)).line(), "too few") {
		t.Error("the line of a series with too few samples does not say so")
	}
}

// A backlog near zero is compared with its floor, not with its level.
func TestJudge_Floor(t *testing.T) {
	s := build(120, 5*time.Second, func(i int) float64 { return float64(i / 60) }, one) // one more message after 5 min: +12/h
	s.floor = 1000
	if v := judge(s, t0); !v.pass || v.allowed != 20 {
		t.Errorf("%+v, want a pass against 2 %% of the floor (20/h)", v)
	}
	s.floor = 0
	if v := judge(s, t0); v.pass {
		t.Errorf("%+v, want a failure against 2 %% of a level of 0.5", v)
	}
}

func TestPercentile(t *testing.T) {
	vals := make([]float64, 200)
	for i := range vals {
		vals[i] = float64(200 - i) // 1…200, reversed
	}
	for _, c := range []struct{ p, want float64 }{{50, 100}, {99, 198}, {100, 200}, {0, 1}} {
		if got := percentile(append([]float64(nil), vals...), c.p); got != c.want {
			t.Errorf("p%g = %g, want %g", c.p, got, c.want)
		}
	}
	if percentile(nil, 99) != 0 {
		t.Error("p99 of nothing is not 0")
	}
}

func TestLines(t *testing.T) {
	pass := verdict{name: "rss command", unit: "B", n: 60, slope: 1 << 10, level: 30 << 20, allowed: 0.02 * (30 << 20), pass: true, lifetimes: 1}
	fail := verdict{name: "goroutines emitter", n: 60, slope: 720, level: 80, allowed: 1.6, lifetimes: 2}
	for _, c := range []struct {
		got  string
		want []string
	}{
		{pass.line(), []string{"rss command", "+1.0KiB/h", "30.00MiB", "60 samples, 1 lifetimes", "pass"}},
		{fail.line(), []string{"goroutines emitter", "+720.00/h", "+900.00 % of level/h", "fail"}},
		{coverage{ticks: 60, excused: 4, lowest: 1}.line(), []string{"100 % on 60 of 60 ticks", "4 excused", "pass"}},
		{coverage{ticks: 60, short: []string{"10:00:05 999/1000"}, lowest: 0.999}.line(), []string{"59 of 60", "10:00:05 999/1000", "fail"}},
		{auditResult{sent: 10, stored: 10, applied: 9, rejected: 1}.line(), []string{"sent 10", "lost 0", "pass"}},
		{auditResult{sent: 10, stored: 10, lost: 1}.line(), []string{"lost 1", "fail"}},
		{summary([]verdict{pass}, coverage{ticks: 3, lowest: 1}, auditResult{stored: 5}, 10*time.Minute, 9), []string{"soak: pass", "1 series", "9 kills", "5 commands over 10m0s"}},
		{summary([]verdict{pass, fail}, coverage{ticks: 3, lowest: 1}, auditResult{stored: 5, doubled: 1}, time.Hour, 9), []string{"soak: fail (goroutines emitter, audit)"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%q lacks %q", c.got, w)
			}
		}
	}
}
