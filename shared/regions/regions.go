// Package regions is the hub's view of the regions (README, Regions): each region's newest
// summary, how old it is by the tick time inside it, and the totals over the fresh ones, as
// `maintctl regions`, the hub's /regions page, GET /api/v1/regions and the hub's metrics all
// show it.
package regions

import (
	"slices"
	"time"

	"maintsignals/shared/domain"
)

// Region is one region as the hub sees it.
type Region struct {
	Region string `json:"region"`
	// AsOf is the tick time of the region's summary: with several emitter shards, the oldest
	// of their newest parts, so that every count is at least that new. Nil until every part
	// of one shard count came in.
	AsOf *time.Time `json:"asOf"`
	// AgeSeconds is how old AsOf is; nil with it.
	AgeSeconds  *float64 `json:"ageSeconds"`
	TickSeconds float64  `json:"tickSeconds"`
	// Stale: AgeSeconds exceeds two of the region's ticks, or nothing complete came in.
	Stale bool `json:"stale"`
	Counts
	// Revision is the sum of the region's records revisions: it changes with every record.
	Revision uint64 `json:"revision"`
	// Campaigns are the phase counts of the region's campaigns (none reported yet).
	Campaigns map[string]map[string]int64 `json:"campaigns"`
}

// Counts are the tracked entities per state (every state present), and those updating,
// overdue, stuck and in conflict with a policy.
type Counts struct {
	Counts    map[domain.State]int64 `json:"counts"`
	Updating  int64                  `json:"updating"`
	Overdue   int64                  `json:"overdue"`
	Stuck     int64                  `json:"stuck"`
	Conflicts int64                  `json:"conflicts"`
}

// View is every region the hub sources, in the order it names them, the totals over the
// fresh ones, and the names of the stale ones.
type View struct {
	Regions      []Region `json:"regions"`
	Totals       Counts   `json:"totals"`
	StaleRegions []string `json:"staleRegions"`
}

// staleTicks is how many of its own ticks a region's summary may be old and still fresh.
const staleTicks = 2

func zeroCounts() Counts {
	c := Counts{Counts: make(map[domain.State]int64, len(domain.States))}
	for _, s := range domain.States {
		c.Counts[s] = 0
	}
	return c
}

func (c *Counts) add(o Counts) {
	for s, n := range o.Counts {
		c.Counts[s] += n
	}
	c.Updating += o.Updating
	c.Overdue += o.Overdue
	c.Stuck += o.Stuck
	c.Conflicts += o.Conflicts
}

// Combine makes the view at now of the named regions from the summary parts the hub holds
// (parts of other regions are left out).
func Combine(names []string, parts []domain.Summary, now time.Time) View {
	v := View{Regions: []Region{}, Totals: zeroCounts(), StaleRegions: []string{}}
	for _, name := range names {
		r := region(name, partsOf(name, parts), now)
		v.Regions = append(v.Regions, r)
		if r.Stale {
			v.StaleRegions = append(v.StaleRegions, name)
		} else {
			v.Totals.add(r.Counts)
		}
	}
	return v
}

// partsOf is the newest part of each shard of the region's newest shard count.
func partsOf(name string, parts []domain.Summary) []domain.Summary {
	var newest *domain.Summary
	for i, p := range parts {
		if p.Region == name && (newest == nil || p.At.After(newest.At)) {
			newest = &parts[i]
		}
	}
	if newest == nil {
		return nil
	}
	byShard := make([]*domain.Summary, newest.Shards)
	for i, p := range parts {
		if p.Region != name || p.Shards != newest.Shards {
			continue
		}
		if cur := byShard[p.Shard]; cur == nil || p.At.After(cur.At) {
			byShard[p.Shard] = &parts[i]
		}
	}
	out := make([]domain.Summary, 0, len(byShard))
	for _, p := range byShard {
		if p == nil {
			return nil // a shard not heard of yet: no complete summary
		}
		out = append(out, *p)
	}
	return out
}

// region is one region from the newest part of each of its shards (none: not heard of).
func region(name string, parts []domain.Summary, now time.Time) Region {
	r := Region{Region: name, Counts: zeroCounts(), Campaigns: map[string]map[string]int64{}, Stale: true}
	if len(parts) == 0 {
		return r
	}
	asOf := parts[0].At
	for _, p := range parts {
		if p.At.Before(asOf) {
			asOf = p.At
		}
		r.TickSeconds = max(r.TickSeconds, p.TickSeconds)
		r.Revision += p.Revision
		r.Counts.add(Counts{Counts: p.Counts, Updating: p.Updating, Overdue: p.Overdue, Stuck: p.Stuck, Conflicts: p.Conflicts})
	}
	asOf = asOf.UTC()
	age := max(now.Sub(asOf).Seconds(), 0)
	r.AsOf, r.AgeSeconds = &asOf, &age
	r.Stale = age > staleTicks*r.TickSeconds
	return r
}

// Names are the regions of a view, in its order.
func (v View) Names() []string {
	out := make([]string, 0, len(v.Regions))
	for _, r := range v.Regions {
		out = append(out, r.Region)
	}
	return slices.Clip(out)
}
