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

func (x *index) stats(now time.Time) Stats {
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
	After  string       // the page after this key
	Before string       // the page before this key (when After is empty)
	Limit  int
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

func (x *index) page(q Query, now time.Time) Page {
	x.mu.RLock()
	defer x.mu.RUnlock()
	t := x.all
	if q.State != "" {
		t = x.byState[stateIndex(q.State)]
	}
	// A prefix covers its own key and the keys under key+"/": two ranges of the key order,
	// with the keys that merely start with it (rg-10 after rg-1) between them.
	var got []*entry
	take := func(e *entry) bool {
		if !domain.KeyUnder(e.key, q.Prefix) {
			return false
		}
		got = append(got, e)
		return len(got) <= q.Limit
	}
	under := q.Prefix
	if under != "" {
		under += "/"
	}
	var p Page
	if q.Before != "" && q.After == "" {
		t.Descend(&entry{key: q.Before}, func(e *entry) bool {
			return e.key == q.Before || !strings.HasPrefix(e.key, under) && e.key > q.Prefix || take(e)
		})
		if len(got) > q.Limit {
			got = got[:q.Limit]
			p.Prev = got[len(got)-1].key
		}
		slices.Reverse(got)
		if len(got) > 0 {
			p.Next = got[len(got)-1].key
		}
	} else {
		from := q.Prefix
		if q.After != "" && q.After >= from {
			from = q.After + "\x00"
		}
		t.Ascend(&entry{key: from}, func(e *entry) bool {
			if e.key != q.Prefix && e.key < under {
				return true // between the prefix's own key and the keys under it
			}
			return take(e)
		})
		if len(got) > q.Limit {
			got = got[:q.Limit]
			p.Next = got[len(got)-1].key
		}
		if q.After != "" && len(got) > 0 && x.hasBefore(t, got[0].key, q.Prefix) {
			p.Prev = got[0].key
		}
	}
	p.Rows = make([]fleet.Record, len(got))
	for i, e := range got {
		p.Rows[i] = x.row(e, now)
	}
	p.Matches = matches(t, q.Prefix)
	return p
}

// hasBefore reports whether t holds a key the prefix covers before key.
func (x *index) hasBefore(t *btree.BTreeG[*entry], key, prefix string) bool {
	found := false
	t.Descend(&entry{key: key}, func(e *entry) bool {
		if e.key == key {
			return true
		}
		if prefix != "" && e.key > prefix && !strings.HasPrefix(e.key, prefix+"/") {
			return true // between the prefix's own key and the keys under it
		}
		found = domain.KeyUnder(e.key, prefix)
		return false
	})
	return found
}

// matches counts the keys the prefix (a key) covers in t: its own, and the range under it.
func matches(t *btree.BTreeG[*entry], prefix string) int {
	if prefix == "" {
		return t.Len()
	}
	n := 0
	if _, ok := t.Get(&entry{key: prefix}); ok {
		n = 1
	}
	under := prefix + "/"
	from := rank(t, func(e *entry) bool { return e.key < under })
	to := rank(t, func(e *entry) bool { return e.key < under || strings.HasPrefix(e.key, under) })
	return n + to - from
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

// timeline is the windows that start on each of the days UTC days from now's.
func (x *index) timeline(now time.Time, days int) []Day {
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
