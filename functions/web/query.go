package web

import (
	"slices"
	"strings"
	"time"

	"github.com/tidwall/btree"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
)

// row is one entity of the fleet table: the record's one shape (fleet.Record), judged at now
// as every reader judges it.
func (x *index) row(e *entry, now time.Time) fleet.Record {
	r := e.record()
	return fleet.View(e.key, e.rev, r, now, x.stuckAfter, x.policies.For(e.key))
}

// Stats are the counts at the top of the fleet page.
type Stats struct {
	Entities  int                  `json:"entities"`
	States    map[domain.State]int `json:"states"`
	Updating  int                  `json:"updating"`
	Overdue   int                  `json:"overdue"`
	Stuck     int                  `json:"stuck"`
	Conflicts int                  `json:"conflicts"`
}

// stats are the counts of the entities c sees (nil: the whole fleet).
func (x *index) stats(now time.Time, c *Customer) Stats {
	if c != nil {
		return x.statsWithin(now, spansFor(c))
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := Stats{Entities: x.all.Len(), States: make(map[domain.State]int, len(domain.States)),
		Updating: x.updating}
	for i, st := range domain.States {
		s.States[st] = x.byState[i].Len()
	}
	// Overdue and stuck hold from their instant on, a conflict until its instant (exclusive).
	n := now.UnixNano()
	s.Overdue = countUpTo(x.overdueAt, n)
	s.Stuck = countUpTo(x.stuckAt, n)
	s.Conflicts = x.conflictTo.Len() - countUpTo(x.conflictTo, n)
	return s
}

// statsWithin counts as stats does, over the entities of the spans: each state from the counts
// of its tree, the facts that time changes by a walk over those entities (the time-ordered
// sets span the fleet; a customer's scopes hold a small part of it).
func (x *index) statsWithin(now time.Time, spans []span) Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := Stats{Entities: countIn(x.all, spans), States: make(map[domain.State]int, len(domain.States))}
	for i, st := range domain.States {
		s.States[st] = countIn(x.byState[i], spans)
	}
	n := now.UnixNano()
	x.each(spans, func(e *entry) {
		if e.updating {
			s.Updating++
		}
		if e.overdueFrom != 0 && e.overdueFrom <= n {
			s.Overdue++
		}
		if e.stuckFrom != 0 && e.stuckFrom <= n {
			s.Stuck++
		}
		if e.conflictUntil != 0 && e.conflictUntil > n {
			s.Conflicts++
		}
	})
	return s
}

// each calls fn with every entity of the spans, in key order. The caller holds the lock.
func (x *index) each(spans []span, fn func(*entry)) {
	for _, s := range spans {
		x.all.Ascend(&entry{key: s.lo}, func(e *entry) bool {
			if !s.holds(e.key) {
				return false
			}
			fn(e)
			return true
		})
	}
}

// countUpTo counts the items at or before at.
func countUpTo(t *btree.BTreeG[timed], at int64) int {
	return rank(t, func(i timed) bool { return i.at <= at })
}

// rank is the number of items of t for which before holds, when it holds for a first part of
// t's order and not after: a binary search over positions, each found through the counts of the
// nodes, so a count of a range of a million costs a few hundred steps, not a million.
func rank[T any](t *btree.BTreeG[T], before func(T) bool) int {
	lo, hi := 0, t.Len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if v, _ := t.GetAt(mid); before(v) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Query selects a page of the fleet table.
type Query struct {
	State  domain.State // "" any
	Prefix string       // a prefix's key (domain.Prefix): the entities it covers ("" any)
	// Viewer, when set, confines the page to the entities of its scopes.
	Viewer *Customer
	After  string // the page after this key
	Before string // the page before this key (when After is empty)
	Limit  int
	// Updating, when set, keeps the entities whose update runs (or not); StartBefore and
	// StartAfter (Unix nanoseconds, 0 none) keep the windows that start strictly before or
	// after them.
	Updating                *bool
	StartBefore, StartAfter int64
}

// admits reports whether e passes the filters that are not a range of a tree.
func (q Query) admits(e *entry) bool {
	if q.Updating != nil && e.updating != *q.Updating {
		return false
	}
	if q.StartBefore != 0 && (!e.hasWindow || e.winStart >= q.StartBefore) {
		return false
	}
	return q.StartAfter == 0 || (e.hasWindow && e.winStart > q.StartAfter)
}

// trees are the orders a page is read from: the index's own, or a walk's snapshot of them.
type trees struct {
	all     *btree.BTreeG[*entry]
	byState []*btree.BTreeG[*entry]
}

// of is the tree of the entities in state s ("" every state).
func (t trees) of(s domain.State) *btree.BTreeG[*entry] {
	if s == "" {
		return t.all
	}
	return t.byState[stateIndex(s)]
}

// Page is a page of the fleet table.
type Page struct {
	Rows []fleet.Record `json:"items"`
	// Matches is how many entities the filter selects, on every page.
	Matches int `json:"matches"`
	// Next and Prev are the cursors of the pages after and before ("" none).
	Next string `json:"next,omitempty"`
	Prev string `json:"prev,omitempty"`
}

// span is a range of the key order: the keys from lo (included) to hi (excluded; "" the end).
type span struct{ lo, hi string }

func (s span) holds(key string) bool { return key >= s.lo && (s.hi == "" || key < s.hi) }

// spansOf are the ranges of the key order that the prefixes (keys, none under another) cover,
// in order. A prefix covers its own key and the keys under key+"/": two ranges, with the keys
// that merely start with it (rg-10 after rg-1) between them ('0' follows '/').
func spansOf(prefixes []string) []span {
	var out []span
	for _, p := range prefixes {
		if p == "" {
			return []span{{}}
		}
		out = append(out, span{p, p + "\x00"}, span{p + "/", p + "0"})
	}
	slices.SortFunc(out, func(a, b span) int { return strings.Compare(a.lo, b.lo) })
	return out
}

// spansFor are the ranges of the key order a viewer sees ("": every entity of the fleet).
func spansFor(c *Customer) []span { return spansOf(c.within("")) }

// count is the number of keys of t in s.
func count(t *btree.BTreeG[*entry], s span) int {
	to := t.Len()
	if s.hi != "" {
		to = rank(t, func(e *entry) bool { return e.key < s.hi })
	}
	if s.lo == "" {
		return to
	}
	return to - rank(t, func(e *entry) bool { return e.key < s.lo })
}

// countIn is the number of keys of t in the spans.
func countIn(t *btree.BTreeG[*entry], spans []span) int {
	n := 0
	for _, s := range spans {
		n += count(t, s)
	}
	return n
}

func (x *index) page(q Query, now time.Time) Page {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.pageIn(trees{x.all, x.byState}, q, now)
}

// pageIn is the page q selects of the trees (the index's, or a snapshot's): the one query of
// the fleet page and of the API. The caller holds the lock (the policies judge the rows).
func (x *index) pageIn(in trees, q Query, now time.Time) Page {
	t := in.of(q.State)
	spans := spansOf(q.Viewer.within(q.Prefix))
	var got []*entry
	var p Page
	if q.Before != "" && q.After == "" {
		got, p = pageBefore(t, spans, q)
	} else {
		got, p = pageAfter(t, spans, q)
	}
	p.Rows = make([]fleet.Record, len(got))
	for i, e := range got {
		p.Rows[i] = x.row(e, now)
	}
	p.Matches = countIn(t, spans)
	return p
}

// pageBefore is the page that ends before q.Before: down from it, span by span, the last
// span first.
func pageBefore(t *btree.BTreeG[*entry], spans []span, q Query) ([]*entry, Page) {
	var got []*entry
	var p Page
	for i := len(spans) - 1; i >= 0 && len(got) <= q.Limit; i-- {
		s := spans[i]
		if s.lo >= q.Before {
			continue
		}
		top := q.Before
		if s.hi != "" && s.hi < top {
			top = s.hi
		}
		t.Descend(&entry{key: top}, func(e *entry) bool {
			if e.key >= top {
				return true // the cursor's own key, or the end of the span
			}
			if e.key < s.lo {
				return false
			}
			if q.admits(e) {
				got = append(got, e)
			}
			return len(got) <= q.Limit
		})
	}
	if len(got) > q.Limit {
		got = got[:q.Limit]
		p.Prev = got[len(got)-1].key
	}
	slices.Reverse(got)
	if len(got) > 0 {
		p.Next = got[len(got)-1].key
	}
	return got, p
}

// pageAfter is the page that starts after q.After (at the start without it).
func pageAfter(t *btree.BTreeG[*entry], spans []span, q Query) ([]*entry, Page) {
	var got []*entry
	var p Page
	from := ""
	if q.After != "" {
		from = q.After + "\x00"
	}
	for _, s := range spans {
		if len(got) > q.Limit {
			break
		}
		lo := max(s.lo, from)
		if s.hi != "" && lo >= s.hi {
			continue
		}
		t.Ascend(&entry{key: lo}, func(e *entry) bool {
			if !s.holds(e.key) {
				return false
			}
			if q.admits(e) {
				got = append(got, e)
			}
			return len(got) <= q.Limit
		})
	}
	if len(got) > q.Limit {
		got = got[:q.Limit]
		p.Next = got[len(got)-1].key
	}
	if q.After != "" && len(got) > 0 && countBefore(t, spans, got[0].key) > 0 {
		p.Prev = got[0].key
	}
	return got, p
}

// countBefore is the number of keys of t in the spans before key.
func countBefore(t *btree.BTreeG[*entry], spans []span, key string) int {
	n := 0
	for _, s := range spans {
		if s.lo >= key {
			break
		}
		if s.hi == "" || s.hi > key {
			s.hi = key
		}
		n += count(t, s)
	}
	return n
}

// Day is one day of the time line: the windows that start on it.
type Day struct {
	Date    string `json:"date"` // YYYY-MM-DD, UTC
	Windows int    `json:"windows"`
	// First are the first windows of the day, by start (at most timelineSample).
	First []fleet.Record `json:"first,omitempty"`
}

// timelineSample is how many windows of a day the time line names.
const timelineSample = 5

// timeline is the windows that start on each of the days UTC days from now's, of the entities
// c sees (nil: the whole fleet).
func (x *index) timeline(now time.Time, days int, c *Customer) []Day {
	if c != nil {
		return x.timelineWithin(now, days, spansFor(c))
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	first := now.UTC().Truncate(24 * time.Hour)
	out := make([]Day, days)
	for d := range out {
		from := first.Add(time.Duration(d) * 24 * time.Hour)
		to := from.Add(24 * time.Hour)
		day := Day{Date: from.Format(time.DateOnly)}
		for h := hourOf(from.UnixNano()); h < hourOf(to.UnixNano()); h++ {
			day.Windows += x.startsHour[h]
		}
		if day.Windows > 0 {
			x.byStart.Ascend(timed{at: from.UnixNano(), e: &entry{}}, func(i timed) bool {
				if i.at >= to.UnixNano() || len(day.First) == timelineSample {
					return false
				}
				day.First = append(day.First, x.row(i.e, now))
				return true
			})
		}
		out[d] = day
	}
	return out
}

// timelineWithin is the time line of the entities of the spans: a walk over them, where the
// fleet's time line reads its counts per hour.
func (x *index) timelineWithin(now time.Time, days int, spans []span) []Day {
	x.mu.RLock()
	defer x.mu.RUnlock()
	first := now.UTC().Truncate(24 * time.Hour)
	from, to := first.UnixNano(), first.Add(time.Duration(days)*24*time.Hour).UnixNano()
	out := make([]Day, days)
	firsts := make([][]timed, days)
	x.each(spans, func(e *entry) {
		if !e.hasWindow || e.winStart < from || e.winStart >= to {
			return
		}
		d := (e.winStart - from) / int64(24*time.Hour)
		out[d].Windows++
		// The earliest timelineSample of the day, by start then key (the fleet's order).
		f, w := firsts[d], timed{e.winStart, e}
		i, _ := slices.BinarySearchFunc(f, w, func(a, b timed) int {
			if lessTimed(a, b) {
				return -1
			}
			return 1
		})
		if i < timelineSample {
			firsts[d] = slices.Insert(f, i, w)[:min(len(f)+1, timelineSample)]
		}
	})
	for d := range out {
		out[d].Date = first.Add(time.Duration(d) * 24 * time.Hour).Format(time.DateOnly)
		for _, w := range firsts[d] {
			out[d].First = append(out[d].First, x.row(w.e, now))
		}
	}
	return out
}
