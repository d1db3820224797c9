package policy

import (
	"sort"
	"time"
)

// maxCachedMonths bounds the months of occurrences a Policy keeps (four years: more than
// Horizon, so one search never evicts what it needs); past it the cache starts again.
const maxCachedMonths = 48

// monthOf numbers the local month of t: year·12 + month − 1, and its local day.
func monthOf(t time.Time, loc *time.Location) (k, day int) {
	y, m, d := t.In(loc).Date()
	return y*12 + int(m) - 1, d
}

// month is the occurrences of local month k, computed once and shared by every caller.
func (p *Policy) month(k int) []span {
	if m := p.months.Load(); m != nil {
		if occ, ok := (*m)[k]; ok {
			return occ
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.months.Load()
	if old != nil {
		if occ, ok := (*old)[k]; ok {
			return occ
		}
	}
	next := make(map[int][]span, maxCachedMonths)
	if old != nil && len(*old) < maxCachedMonths {
		for key, v := range *old {
			next[key] = v
		}
	}
	occ := expandMonth(p.rules, p.loc, k)
	next[k] = occ
	p.months.Store(&next) // readers see whole maps only: copy on write
	return occ
}

// cursor walks, by start, the occurrences that start in [from, until]. It lives on the
// caller's stack: the queries that use it do not allocate.
type cursor struct {
	p           *Policy
	from, until time.Time
	k, last     int
	occ         []span
	i           int
}

func (p *Policy) seek(from, until time.Time) cursor {
	k, day := monthOf(from, p.loc)
	if day == 1 {
		k-- // a start in a daylight-saving gap can move past the midnight that ends a month
	}
	last, _ := monthOf(until, p.loc)
	c := cursor{p: p, from: from, until: until, k: max(k, minYear*12) - 1, last: min(last, maxYear*12+11)}
	return c
}

// next is the following occurrence; false when there is none up to until.
func (c *cursor) next() (span, bool) {
	for c.i >= len(c.occ) {
		if c.k++; c.k > c.last {
			return span{}, false
		}
		c.occ = c.p.month(c.k)
		c.i = sort.Search(len(c.occ), func(i int) bool { return !c.occ[i].start.Before(c.from) })
	}
	o := c.occ[c.i]
	if o.start.After(c.until) {
		c.k, c.occ = c.last, nil
		return span{}, false
	}
	c.i++
	return o, true
}
