package main

import (
	"fmt"
	"sync"
	"time"

	"maintsignals/test/otlpreceiver"
)

// ticks judges each tick's emission, as received, against the entities the tick must export;
// a tick that came to nothing counts as 0 %. Ticks are slots of the schedule, anchored at the
// first tick received.
type ticks struct {
	r     *otlpreceiver.Receiver
	fleet *fleet
	tick  time.Duration
	from  time.Time // ticks before are not judged (the setup)

	mu     sync.Mutex
	anchor time.Time // a tick's time; zero until one came
	next   int       // the next slot to judge, counted from anchor
	kills  []time.Time
	cov    coverage
}

// killed notes a kill: the first tick after it is excused.
func (c *ticks) killed(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kills = append(c.kills, at)
}

// midTick is the first time after at halfway between two ticks (at itself before the first
// tick came): a kill there does not cut a run short, so that only the tick after it can miss.
func (c *ticks) midTick(at time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.anchor.IsZero() {
		return at
	}
	n := at.Sub(c.anchor) / c.tick
	mid := c.anchor.Add(n*c.tick + c.tick/2)
	for mid.Before(at) {
		mid = mid.Add(c.tick)
	}
	return mid
}

// judge judges every tick whose run is over by now.
func (c *ticks) judge(now time.Time) {
	counts := c.r.TickCounts()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.anchor.IsZero() {
		for _, tc := range counts {
			if !tc.At.Before(c.from) {
				c.anchor = tc.At
				break
			}
		}
		if c.anchor.IsZero() {
			return
		}
	}
	for {
		slot := c.anchor.Add(time.Duration(c.next) * c.tick)
		if slot.Add(c.tick + time.Second).After(now) {
			return
		}
		c.next++
		if c.excusedLocked(slot) {
			c.cov.excused++
			continue
		}
		c.judgeSlot(slot, counts)
	}
}

// excusedLocked: a kill came within the tick before slot.
func (c *ticks) excusedLocked(slot time.Time) bool {
	for _, k := range c.kills {
		if k.Before(slot.Add(c.tick/2)) && k.After(slot.Add(-c.tick)) {
			return true
		}
	}
	return false
}

// judgeSlot compares the emission nearest slot with the entities it must carry.
func (c *ticks) judgeSlot(slot time.Time, counts []otlpreceiver.TickCount) {
	var got map[string]bool
	at := slot
	for _, tc := range counts {
		if d := tc.At.Sub(slot); d > -c.tick/2 && d <= c.tick/2 {
			got, at = c.r.TickValues(tc.At), tc.At
			break
		}
	}
	want := c.fleet.expected(at, c.tick)
	found := 0
	for res := range want {
		if got[res] {
			found++
		}
	}
	c.cov.ticks++
	share := 1.0
	if len(want) > 0 {
		share = float64(found) / float64(len(want))
	}
	if c.cov.ticks == 1 || share < c.cov.lowest {
		c.cov.lowest = share
	}
	if found < len(want) {
		c.cov.short = append(c.cov.short, fmt.Sprintf("%s %d/%d", at.Format("15:04:05"), found, len(want)))
	}
}

// result is the coverage so far.
func (c *ticks) result() coverage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cov
}
