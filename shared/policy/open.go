package policy

import (
	"sort"
	"time"

	"maintsignals/shared/domain"
)

// The 48/32 rule: no policy may block maintenance for good. In every span of OpenSpan in the
// OpenHorizon after a policy is set, at least MinOpen must be allowed, counting only unbroken
// stretches of allowed time (inside the windows, outside the blackouts) of at least MinStretch.
const (
	MinOpen     = 48 * time.Hour
	MinStretch  = 4 * time.Hour
	OpenSpan    = 32 * domain.Day
	OpenHorizon = 365 * domain.Day
)

// CheckOpen applies the 48/32 rule from now; a rejection has target "windows" and names the
// worst span. A stretch counts by its whole length (one that crosses a span's edge is not
// shortened by it), but only its part inside the span and inside the horizon is added.
func (p *Policy) CheckOpen(now time.Time) *domain.Rejection {
	end := now.Add(OpenHorizon)
	var open []span
	for _, s := range p.stretches(now.Add(-MinStretch), end.Add(MinStretch)) {
		if s.end.Sub(s.start) < MinStretch {
			continue
		}
		if s = (span{later(s.start, now), earlier(s.end, end)}); s.end.After(s.start) {
			open = append(open, s)
		}
	}
	worst, least := leastOpen(open, now, end.Add(-OpenSpan))
	if least >= MinOpen {
		return nil
	}
	return domain.InvalidParameter("windows", "leaves %s of allowed time in stretches of at least %s in the 32 days from %s (windows less blackouts); every 32-day span of the next 365 days needs at least %s",
		least.Round(time.Minute), MinStretch, worst.UTC().Format(time.RFC3339), MinOpen)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stretches is the allowed time in [from, to): the union of the windows' occurrences (all of
// it when there are none), less the blackouts, as maximal disjoint spans by start.
func (p *Policy) stretches(from, to time.Time) []span {
	if len(p.rules) == 0 {
		return subtract([]span{{from, to}}, p.closed)
	}
	var union []span
	c := p.seek(from.Add(-p.maxDur), to)
	for o, ok := c.next(); ok; o, ok = c.next() {
		o = span{later(o.start, from), earlier(o.end, to)}
		if !o.end.After(o.start) {
			continue
		}
		if n := len(union); n > 0 && !o.start.After(union[n-1].end) {
			union[n-1].end = later(union[n-1].end, o.end)
			continue
		}
		union = append(union, o)
	}
	return subtract(union, p.closed)
}

// subtract removes the disjoint, sorted spans cut from the disjoint, sorted spans of in.
func subtract(in, cut []span) []span {
	var out []span
	j := 0
	for _, s := range in {
		for j < len(cut) && !cut[j].end.After(s.start) {
			j++
		}
		for k := j; k < len(cut) && cut[k].start.Before(s.end); k++ {
			if cut[k].start.After(s.start) {
				out = append(out, span{s.start, cut[k].start})
			}
			s.start = later(s.start, cut[k].end)
		}
		if s.end.After(s.start) {
			out = append(out, s)
		}
	}
	return out
}

// leastOpen finds the span [a, a+OpenSpan), a in [first, last], with the least open time, and
// that time. The total is piecewise linear in a, so its minimum is at a bound or where an
// edge of the span meets an edge of a stretch: only those starts are tried.
func leastOpen(open []span, first, last time.Time) (time.Time, time.Duration) {
	cum := make([]time.Duration, len(open)+1)
	for i, s := range open {
		cum[i+1] = cum[i] + s.end.Sub(s.start)
	}
	upTo := func(t time.Time) time.Duration { // open time before t
		k := sort.Search(len(open), func(i int) bool { return open[i].end.After(t) })
		d := cum[k]
		if k < len(open) && open[k].start.Before(t) {
			d += t.Sub(open[k].start)
		}
		return d
	}
	worst, least := first, time.Duration(1<<63-1)
	try := func(a time.Time) {
		if a.Before(first) || a.After(last) {
			return
		}
		if d := upTo(a.Add(OpenSpan)) - upTo(a); d < least {
			worst, least = a, d
		}
	}
	try(first)
	try(last)
	for _, s := range open {
		for _, edge := range []time.Time{s.start, s.end} {
			try(edge)
			try(edge.Add(-OpenSpan))
		}
	}
	return worst, least
}
