package policy

import (
	"fmt"
	"sort"
	"time"

	"maintsignals/shared/domain"
)

// Horizon is how far after notBefore NextAllowed looks.
const Horizon = 2 * 366 * domain.Day

// InBlackout reports whether t lies in a blackout: from its start date's local midnight,
// inclusive, to its end date's, exclusive.
func (p *Policy) InBlackout(t time.Time) bool {
	i := p.closedAfter(t)
	return i < len(p.closed) && !t.Before(p.closed[i].start)
}

// closedAfter is the index of the first merged blackout that ends after t.
func (p *Policy) closedAfter(t time.Time) int {
	return sort.Search(len(p.closed), func(i int) bool { return p.closed[i].end.After(t) })
}

// overlapsBlackout reports whether [start, end) shares an instant with a blackout.
func (p *Policy) overlapsBlackout(start, end time.Time) bool {
	i := p.closedAfter(start)
	return i < len(p.closed) && p.closed[i].start.Before(end)
}

// InAllowedWindow reports whether t lies inside an occurrence of an allowed window (start
// inclusive, end exclusive), or the policy has no windows. Blackouts are InBlackout's.
func (p *Policy) InAllowedWindow(t time.Time) bool {
	if len(p.rules) == 0 {
		return true
	}
	c := p.seek(t.Add(-p.maxDur), t)
	for o, ok := c.next(); ok; o, ok = c.next() {
		if o.end.After(t) {
			return true
		}
	}
	return false
}

// Allows reports whether the window w may be announced: it lies inside one occurrence of an
// allowed window (start ≥ the occurrence's start, end ≤ its end), or anywhere when the policy
// has none, and it overlaps no blackout. An empty or inverted window is not allowed.
func (p *Policy) Allows(w domain.Window) bool {
	return w.End.After(w.Start) && !p.overlapsBlackout(w.Start, w.End) && p.insideOccurrence(w)
}

// Why says why the window w is not allowed, "" when it is. The reasons read after
// "the window ...": "is not inside an allowed window", "overlaps the blackout ...".
func (p *Policy) Why(w domain.Window) string {
	if !w.End.After(w.Start) {
		return "is empty"
	}
	if p.overlapsBlackout(w.Start, w.End) {
		for _, b := range p.blackouts {
			if b.start.Before(w.End) && w.Start.Before(b.end) {
				return "overlaps the blackout " + b.describe()
			}
		}
	}
	if !p.insideOccurrence(w) {
		return "is not inside one occurrence of an allowed window"
	}
	return ""
}

func (b blackout) describe() string {
	s := fmt.Sprintf("%s (end exclusive)", b.window)
	if b.doc.Reason != "" {
		s += fmt.Sprintf(" %q", truncate(b.doc.Reason, 80))
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (p *Policy) insideOccurrence(w domain.Window) bool {
	if len(p.rules) == 0 {
		return true
	}
	if w.End.Sub(w.Start) > p.maxDur {
		return false
	}
	c := p.seek(w.Start.Add(-p.maxDur), w.Start)
	for o, ok := c.next(); ok; o, ok = c.next() {
		if !o.end.Before(w.End) {
			return true
		}
	}
	return false
}

// NextAllowed is the earliest start at or after notBefore of a window of the given length
// that Allows, looking up to Horizon ahead; false when there is none (no window is that long,
// or none is free of blackouts in time).
func (p *Policy) NextAllowed(length time.Duration, notBefore time.Time) (time.Time, bool) {
	if length <= 0 || len(p.rules) > 0 && length > p.maxDur {
		return time.Time{}, false
	}
	limit := notBefore.Add(Horizon)
	if len(p.rules) == 0 {
		s := p.clearOf(notBefore, length)
		return s, !s.After(limit)
	}
	// By start: for occurrences a ≤ b, the first clear start in a is ≤ the first in b, so the
	// first occurrence that holds one holds the earliest.
	c := p.seek(notBefore.Add(-p.maxDur), limit)
	for o, ok := c.next(); ok; o, ok = c.next() {
		if o.end.Sub(notBefore) < length {
			continue
		}
		s := p.clearOf(later(o.start, notBefore), length)
		if !s.Add(length).After(o.end) {
			return s, !s.After(limit)
		}
	}
	return time.Time{}, false
}

// clearOf is the earliest start ≥ t of a window of that length that overlaps no blackout.
func (p *Policy) clearOf(t time.Time, length time.Duration) time.Time {
	for i := p.closedAfter(t); i < len(p.closed) && p.closed[i].start.Before(t.Add(length)); i++ {
		t = p.closed[i].end // the merged blackouts are disjoint and by start
	}
	return t
}

// NextAllowedAligned is NextAllowed for starts on a grid: the earliest origin + k·step
// (k any integer) at or after notBefore whose window of that length Allows, as a planner's
// slots are.
func (p *Policy) NextAllowedAligned(length time.Duration, notBefore, origin time.Time, step time.Duration) (time.Time, bool) {
	if step <= 0 {
		return time.Time{}, false
	}
	limit := notBefore.Add(Horizon)
	for t := notBefore; ; {
		s, ok := p.NextAllowed(length, t)
		if !ok {
			return time.Time{}, false
		}
		g := alignUp(s, origin, step)
		if g.After(limit) {
			return time.Time{}, false
		}
		if p.Allows(domain.Window{Start: g, End: g.Add(length)}) {
			return g, true
		}
		t = g // NextAllowed(g) is after g, so every turn moves at least one step
	}
}

// alignUp is the first origin + k·step at or after t.
func alignUp(t, origin time.Time, step time.Duration) time.Time {
	d := t.Sub(origin)
	k := d / step
	if d%step > 0 {
		k++
	}
	return origin.Add(k * step)
}

// Occurrences lists the occurrences of the allowed windows that start in [from, until), by
// start, blackouts not taken out (nil when the policy has no windows): what `policy check`
// shows, and what a reader can check a rule against.
func (p *Policy) Occurrences(from, until time.Time) []domain.Window {
	var out []domain.Window
	c := p.seek(from, until)
	for o, ok := c.next(); ok; o, ok = c.next() {
		if o.start.Before(until) {
			out = append(out, domain.Window{Start: o.start, End: o.end})
		}
	}
	return out
}
