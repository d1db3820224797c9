package otlpreceiver

import (
	"sort"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
)

// TickCount is what the receiver counted of one tick: the points of the counted metric that
// carry the tick's time.
type TickCount struct {
	At time.Time
	// Distinct counts the distinct values of the counted attribute among the points whose
	// value is 1 (for cluster.maintenance.status: the entities exported); Duplicates, the
	// points with value 1 whose attribute value had come before at this time.
	Distinct, Duplicates int
	// Requests counts the requests that carried points of the tick.
	Requests int
}

// WithTickCounts makes the receiver count, per point time (one tick's points carry its
// time), the points of metric with value 1 by the value of attribute attr, keeping the last
// keep ticks. It works with or without payloads (WithoutPayloads), so a test can follow a
// large fleet tick by tick.
func WithTickCounts(metric, attr string, keep int) Option {
	return func(r *Receiver) {
		r.counts = &tickCounts{metric: metric, attr: attr, keep: keep, ticks: map[uint64]*tickState{}, last: map[string]uint64{}}
	}
}

type tickCounts struct {
	metric, attr string
	keep         int
	ticks        map[uint64]*tickState
	last         map[string]uint64 // per attribute value, the latest tick it was counted in
}

type tickState struct {
	ids        map[string]struct{}
	duplicates int
	requests   int
}

// count adds one request; the receiver's lock is held.
func (c *tickCounts) count(req *colmetricpb.ExportMetricsServiceRequest) {
	seen := map[uint64]bool{}
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() != c.metric {
					continue
				}
				for _, dp := range m.GetGauge().GetDataPoints() {
					c.point(dp, seen)
				}
			}
		}
	}
	if len(c.ticks) > c.keep {
		times := make([]uint64, 0, len(c.ticks))
		for at := range c.ticks {
			times = append(times, at)
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		for _, at := range times[:len(times)-c.keep] {
			delete(c.ticks, at)
		}
	}
}

func (c *tickCounts) point(dp *metricpb.NumberDataPoint, seen map[uint64]bool) {
	at := dp.GetTimeUnixNano()
	st := c.ticks[at]
	if st == nil {
		st = &tickState{ids: map[string]struct{}{}}
		c.ticks[at] = st
	}
	if !seen[at] {
		seen[at] = true
		st.requests++
	}
	if dp.GetAsInt() != 1 && dp.GetAsDouble() != 1 {
		return
	}
	for _, kv := range dp.GetAttributes() {
		if kv.GetKey() != c.attr {
			continue
		}
		id := kv.GetValue().GetStringValue()
		c.last[id] = max(c.last[id], at)
		if _, dup := st.ids[id]; dup {
			st.duplicates++
		} else {
			st.ids[id] = struct{}{}
		}
	}
}

// TickCounts returns the counts of the ticks kept, oldest first (nil without WithTickCounts).
func (r *Receiver) TickCounts() []TickCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		return nil
	}
	out := make([]TickCount, 0, len(r.counts.ticks))
	for at, st := range r.counts.ticks {
		out = append(out, TickCount{At: unixNano(at), Distinct: len(st.ids), Duplicates: st.duplicates, Requests: st.requests})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// TickValues are the distinct values of the counted attribute among the points of value 1 of
// the tick at time at (with WithTickCounts, while the tick is kept): for
// cluster.maintenance.status, the entities that tick exported.
func (r *Receiver) TickValues(at time.Time) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		return nil
	}
	st := r.counts.ticks[uint64(at.UnixNano())]
	if st == nil {
		return nil
	}
	out := make(map[string]bool, len(st.ids))
	for id := range st.ids {
		out[id] = true
	}
	return out
}

// SeenSince is how many distinct values of the counted attribute were counted in a tick at or
// after t (with WithTickCounts): for cluster.maintenance.status, the entities exported since.
func (r *Receiver) SeenSince(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		return 0
	}
	n := 0
	for _, at := range r.counts.last {
		if !unixNano(at).Before(t) {
			n++
		}
	}
	return n
}
