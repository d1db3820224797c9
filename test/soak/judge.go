package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// maxGrowth is the most a series may grow per hour, as a share of its level (SPEC §15).
const maxGrowth = 0.02

// sample is one value of a series at a time, in the lifetime life of what it measures (a
// process's; 0 for what no restart resets).
type sample struct {
	at   time.Time
	life int
	v    float64
}

// series is what the soak judges: samples of one quantity.
type series struct {
	name string
	unit string // "B", "s" or "" (a count)
	// floor is the least level the growth is compared with: a backlog near zero may still
	// grow by a share of a tick's commands.
	floor   float64
	samples []sample
}

// add appends a sample.
func (s *series) add(at time.Time, life int, v float64) {
	s.samples = append(s.samples, sample{at: at, life: life, v: v})
}

// verdict is the judgement of a series over a window.
type verdict struct {
	name      string
	unit      string
	n         int     // samples judged
	slope     float64 // per hour, Theil–Sen within lifetimes
	level     float64 // median of the samples judged
	allowed   float64 // the most slope that passes, per hour
	pass      bool
	tooFew    bool
	lifetimes int
}

// minSamples is the fewest samples a series is judged on.
const minSamples = 8

// judge judges the samples of s taken at or after from: the Theil–Sen slope (the median of
// the slopes between every two samples of the same lifetime; a restart starts the series
// again, so no pair spans one), against maxGrowth of the median level or of the floor.
func judge(s *series, from time.Time) verdict {
	v := verdict{name: s.name, unit: s.unit}
	var in []sample
	lives := map[int]bool{}
	for _, x := range s.samples {
		if !x.at.Before(from) {
			in = append(in, x)
			lives[x.life] = true
		}
	}
	v.n, v.lifetimes = len(in), len(lives)
	if len(in) < minSamples {
		v.tooFew = true
		return v
	}
	vals := make([]float64, len(in))
	for i, x := range in {
		vals[i] = x.v
	}
	v.level = median(vals)
	v.slope = theilSen(in)
	v.allowed = maxGrowth * math.Max(math.Abs(v.level), s.floor)
	v.pass = v.slope <= v.allowed
	return v
}

// theilSen is the median of the slopes (per hour) of every pair of samples of one lifetime,
// taken at different times; 0 when there is no such pair.
func theilSen(in []sample) float64 {
	var slopes []float64
	for i := range in {
		for j := i + 1; j < len(in); j++ {
			a, b := in[i], in[j]
			dt := b.at.Sub(a.at).Hours()
			if a.life != b.life || dt == 0 {
				continue
			}
			slopes = append(slopes, (b.v-a.v)/dt)
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	return median(slopes)
}

// median of vals (which it sorts); 0 for none.
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	n := len(vals)
	if n%2 == 1 {
		return vals[n/2]
	}
	return (vals[n/2-1] + vals[n/2]) / 2
}

// percentile is the p-th percentile (0–100, nearest rank) of vals, which it sorts.
func percentile(vals []float64, p float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	i := int(math.Ceil(p/100*float64(len(vals)))) - 1
	return vals[max(0, min(i, len(vals)-1))]
}

// line is the output line of a verdict: name, slope per hour (and as a share of the level),
// level, samples and lifetimes, and pass or fail.
func (v verdict) line() string {
	word := "pass"
	if !v.pass {
		word = "fail"
	}
	if v.tooFew {
		return fmt.Sprintf("%-28s %d samples, too few to judge  fail", v.name, v.n)
	}
	share := 0.0
	if base := math.Max(math.Abs(v.level), v.allowed/maxGrowth); base > 0 {
		share = v.slope / base * 100
	}
	sign := "+"
	if v.slope < 0 {
		sign = ""
	}
	return fmt.Sprintf("%-28s slope %10s/h (%+7.2f %% of level/h, limit %s/h)  level %9s  %4d samples, %d lifetimes  %s",
		v.name, sign+human(v.slope, v.unit), share, human(v.allowed, v.unit), human(v.level, v.unit), v.n, v.lifetimes, word)
}

// human prints a value in its unit: bytes in KiB or MiB, seconds in ms.
func human(x float64, unit string) string {
	switch unit {
	case "B":
		if math.Abs(x) >= 1<<20 {
			return fmt.Sprintf("%.2fMiB", x/(1<<20))
		}
		return fmt.Sprintf("%.1fKiB", x/(1<<10))
	case "s":
		return fmt.Sprintf("%.1fms", x*1000)
	}
	return fmt.Sprintf("%.2f", x)
}

// coverage is what the ticks' emissions covered: the ticks judged, those excused (the one
// after each kill), and the judged ticks that missed an entity, with the lowest coverage.
type coverage struct {
	ticks, excused int
	short          []string // "15:04:05 998/1000"
	lowest         float64
}

func (c coverage) pass() bool { return c.ticks > 0 && len(c.short) == 0 }

func (c coverage) line() string {
	word := "pass"
	if !c.pass() {
		word = "fail"
	}
	detail := ""
	if len(c.short) > 0 {
		detail = "; short: " + strings.Join(c.short[:min(len(c.short), 5)], ", ")
	}
	return fmt.Sprintf("%-28s 100 %% on %d of %d ticks judged (%d excused: the tick after a kill), lowest %.2f %%%s  %s",
		"coverage", c.ticks-len(c.short), c.ticks, c.excused, c.lowest*100, detail, word)
}

// summary is the last line: pass when every verdict, the coverage and the audit pass.
func summary(vs []verdict, cov coverage, audit auditResult, d time.Duration, kills int) string {
	var failed []string
	for _, v := range vs {
		if !v.pass {
			failed = append(failed, v.name)
		}
	}
	if !cov.pass() {
		failed = append(failed, "coverage")
	}
	if !audit.pass() {
		failed = append(failed, "audit")
	}
	what := fmt.Sprintf("%d series, %d ticks, %d kills, %d commands over %s", len(vs), cov.ticks+cov.excused, kills, audit.stored, d.Round(time.Second))
	if len(failed) > 0 {
		return fmt.Sprintf("soak: fail (%s) — %s", strings.Join(failed, ", "), what)
	}
	return "soak: pass — " + what
}

// auditResult is what the audit found of the commands sent.
type auditResult struct {
	sent, stored, applied, rejected, deadLettered int
	lost, doubled, mismatches                     int
}

func (a auditResult) pass() bool {
	return a.stored > 0 && a.lost == 0 && a.doubled == 0 && a.mismatches == 0
}

func (a auditResult) line() string {
	word := "pass"
	if !a.pass() {
		word = "fail"
	}
	return fmt.Sprintf("%-28s sent %d, stored %d, applied %d, rejected %d, dead-lettered %d; lost %d, applied twice %d, records off the model %d  %s",
		"audit", a.sent, a.stored, a.applied, a.rejected, a.deadLettered, a.lost, a.doubled, a.mismatches, word)
}
