package emitter

import (
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"maintsignals/shared/domain"
)

// A request is built directly as OTLP protobuf, in arenas of points and attributes that are
// reused from one request to the next: a request is marshalled and compressed before its
// export returns, so its batch can then be filled again. Attribute values shared by many
// points (the states, the shard) exist once.

// place is where an entity was met in a sweep: its ordinal and its revision (the position
// to sweep from when the run stops before it).
type place struct {
	ord int
	rev uint64
}

// idAttr is the attribute naming one entity, with the values it points to.
type idAttr struct {
	kv commonpb.KeyValue
	av commonpb.AnyValue
	sv commonpb.AnyValue_StringValue
}

// batch is the points of one request of one shard.
type batch struct {
	shard    int // index of the shard in its run
	entities int
	first    place // of its first entity
	last     bool  // the shard's last request, with the fleet view
	bytes    int

	pts   []metricpb.NumberDataPoint
	dbls  []metricpb.NumberDataPoint_AsDouble
	attrs []*commonpb.KeyValue
	ids   []idAttr

	status, compat, winStart, winEnd, stateStart, entitiesByState, overdue, stuck, conflicts []*metricpb.NumberDataPoint

	m       [9]metricpb.Metric
	g       [9]metricpb.Gauge
	mg      [9]metricpb.Metric_Gauge
	metrics []*metricpb.Metric
	sm      metricpb.ScopeMetrics
}

// newBatch makes a batch with room for maxPts entity points and a fleet view.
func newBatch(maxPts int) *batch {
	n := maxPts + fleetPoints
	return &batch{
		pts:   make([]metricpb.NumberDataPoint, 0, n),
		dbls:  make([]metricpb.NumberDataPoint_AsDouble, 0, maxPts),
		attrs: make([]*commonpb.KeyValue, 0, 2*n),
		ids:   make([]idAttr, 0, maxPts),
	}
}

// reset empties b for the next request of shard.
func (b *batch) reset(shard int) {
	b.shard, b.entities, b.first, b.last, b.bytes = shard, 0, place{}, false, requestOverhead
	b.pts, b.dbls, b.attrs, b.ids = b.pts[:0], b.dbls[:0], b.attrs[:0], b.ids[:0]
	for _, l := range []*[]*metricpb.NumberDataPoint{&b.status, &b.compat, &b.winStart, &b.winEnd, &b.stateStart, &b.entitiesByState, &b.overdue, &b.stuck, &b.conflicts} {
		*l = (*l)[:0]
	}
}

// entityPoints is the number of per-entity points in the batch.
func (b *batch) entityPoints() int {
	return len(b.status) + len(b.compat) + len(b.winStart) + len(b.winEnd) + len(b.stateStart)
}

// id is the attribute key=value for one entity, from the arena.
func (b *batch) id(key, value string) *commonpb.KeyValue {
	b.ids = b.ids[:len(b.ids)+1]
	a := &b.ids[len(b.ids)-1]
	a.sv.StringValue = value
	a.av.Value = &a.sv
	a.kv.Key, a.kv.Value = key, &a.av
	return &a.kv
}

// point appends a point at time ns with the given attributes to list, from the arena.
func (b *batch) point(list *[]*metricpb.NumberDataPoint, ns uint64, attrs ...*commonpb.KeyValue) *metricpb.NumberDataPoint {
	start := len(b.attrs)
	b.attrs = append(b.attrs, attrs...)
	b.pts = b.pts[:len(b.pts)+1]
	p := &b.pts[len(b.pts)-1]
	p.Attributes = b.attrs[start:len(b.attrs):len(b.attrs)]
	p.TimeUnixNano = ns
	*list = append(*list, p)
	return p
}

// intPoint and doublePoint are point with their value.
func (b *batch) intPoint(list *[]*metricpb.NumberDataPoint, ns uint64, v int64, attrs ...*commonpb.KeyValue) {
	p := b.point(list, ns, attrs...)
	if v == 0 || v == 1 {
		p.Value = asInt[v]
		return
	}
	p.Value = &metricpb.NumberDataPoint_AsInt{AsInt: v}
}

func (b *batch) doublePoint(list *[]*metricpb.NumberDataPoint, ns uint64, v float64, attrs ...*commonpb.KeyValue) {
	p := b.point(list, ns, attrs...)
	b.dbls = b.dbls[:len(b.dbls)+1]
	d := &b.dbls[len(b.dbls)-1]
	d.AsDouble = v
	p.Value = d
}

// seal returns the batch as scope metrics; they hold the batch's arenas.
func (b *batch) seal() *metricpb.ScopeMetrics {
	b.metrics = b.metrics[:0]
	add := func(name, desc, unit string, pts []*metricpb.NumberDataPoint) {
		if len(pts) == 0 {
			return
		}
		k := len(b.metrics)
		b.g[k].DataPoints = pts
		b.mg[k].Gauge = &b.g[k]
		m := &b.m[k]
		m.Name, m.Description, m.Unit, m.Data = name, desc, unit, &b.mg[k]
		b.metrics = append(b.metrics, m)
	}
	add(MetricStatus, descStatus, "1", b.status)
	add(MetricPUCM, descPUCM, "1", b.compat)
	add(MetricWindowStart, descWindowStart, "s", b.winStart)
	add(MetricWindowEnd, descWindowEnd, "s", b.winEnd)
	add(MetricStateStart, descStateStart, "s", b.stateStart)
	add(MetricEntities, descEntities, "{entity}", b.entitiesByState)
	add(MetricOverdue, descOverdue, "{entity}", b.overdue)
	add(MetricStuck, descStuck, "{entity}", b.stuck)
	add(MetricConflicts, descConflicts, "{entity}", b.conflicts)
	b.sm.Scope, b.sm.Metrics = scope, b.metrics
	return &b.sm
}

// batcher turns the entities of one shard into requests of bounded size. Every point of a run
// carries the same timestamp: the moment the run began reading the bucket.
type batcher struct {
	shard    int
	shardKV  *commonpb.KeyValue
	now      time.Time
	ns       uint64
	pucm     bool
	stuckAt  time.Duration
	maxPts   int
	maxBytes int
	get      func() *batch // an empty batch
	cur      *batch

	// byState counts the tracked entities per state (indexed as domain.States), for
	// cluster.maintenance.entities: those emitted, and those in None past the retention (no
	// longer emitted, still in None), so that the fleet view counts what list and the web view
	// count. A forgotten entity is not counted.
	byState  []int64
	entities int
	points   int
	// overdue and stuck count the emitted entities Pending past their window, and updating
	// for longer than the stuck limit; conflicts those whose window a customer's policy,
	// changed since, no longer allows (the run counts them: conflict).
	overdue, stuck, conflicts int64
	// updating counts the emitted entities whose update is in progress (the region's summary).
	updating int64
}

// conflict counts an emitted entity whose window is in conflict with its policy.
func (b *batcher) conflict() { b.conflicts++ }

func newBatcher(shard int, sh domain.Shard, now time.Time, cfg Config, get func() *batch) *batcher {
	return &batcher{
		shard: shard, shardKV: stringKV(AttrShard, sh.String()), now: now, ns: uint64(now.UnixNano()),
		pucm: cfg.PUCM, stuckAt: cfg.StuckAfter, maxPts: cfg.BatchSize, maxBytes: cfg.MaxRequestBytes,
		get: get, byState: make([]int64, len(domain.States)),
	}
}

// add appends the points of one entity, whose record r is in state index si, met at at. When
// they would not fit in the current batch, that batch is returned first (full) and the entity
// starts the next.
func (b *batcher) add(resourceID string, si int, r domain.Record, at place) (full *batch) {
	n := len(domain.States)
	size := n * (pointOverhead + len(resourceID) + len("customer_action_needed"))
	if b.pucm {
		n++
		size += pointOverhead + len(resourceID) + len("customerActionNeeded")
	}
	// A time that was never set is left out rather than sent as 1970.
	hasWindow := r.Window != nil && !r.Window.Start.IsZero() && !r.Window.End.IsZero()
	hasSince := !r.StateSince.IsZero()
	times := 0
	if hasWindow {
		times += 2
	}
	if hasSince {
		times++
	}
	n += times
	size += times * (pointOverhead + len(resourceID))
	if b.cur != nil && b.cur.entityPoints() > 0 && (b.cur.entityPoints()+n > b.maxPts || b.cur.bytes+size > b.maxBytes) {
		full, b.cur = b.cur, nil
	}
	if b.cur == nil {
		b.cur = b.get()
		b.cur.reset(b.shard)
		b.cur.first = at
	}
	c := b.cur
	id := c.id(AttrResourceID, resourceID)
	for i := range domain.States {
		var v int64
		if i == si {
			v = 1
		}
		c.intPoint(&c.status, b.ns, v, id, stateAttrs[i])
	}
	if b.pucm {
		// Attributes in key order, as the SDK sorts them: resourceId, state.
		c.intPoint(&c.compat, b.ns, 1, c.id(AttrPUCMResourceID, resourceID), pucmAttrs[si])
	}
	if hasWindow {
		c.doublePoint(&c.winStart, b.ns, unixSeconds(r.Window.Start), id)
		c.doublePoint(&c.winEnd, b.ns, unixSeconds(r.Window.End), id)
	}
	if hasSince {
		c.doublePoint(&c.stateStart, b.ns, unixSeconds(r.StateSince), id)
	}
	b.judge(r)
	c.bytes += size
	c.entities++
	b.byState[si]++
	b.entities++
	b.points += n
	return full
}

// judge counts an emitted record among the overdue, the stuck and the updating.
func (b *batcher) judge(r domain.Record) {
	if r.Overdue(b.now) {
		b.overdue++
	}
	if r.Stuck(b.now, b.stuckAt) {
		b.stuck++
	}
	if r.Updating {
		b.updating++
	}
}

// finish returns the shard's last batch: the entities not sent yet and the fleet view of the
// shard, which is known only once every entity has been seen.
func (b *batcher) finish(at place) *batch {
	c := b.cur
	if c == nil {
		c = b.get()
		c.reset(b.shard)
		c.first = at
	}
	b.cur = nil
	for i := range domain.States {
		// Attributes in key order: cluster.maintenance.emitter.shard, cluster.maintenance.state.
		c.intPoint(&c.entitiesByState, b.ns, b.byState[i], b.shardKV, stateAttrs[i])
	}
	c.intPoint(&c.overdue, b.ns, b.overdue, b.shardKV)
	c.intPoint(&c.stuck, b.ns, b.stuck, b.shardKV)
	c.intPoint(&c.conflicts, b.ns, b.conflicts, b.shardKV)
	c.last = true
	b.points += fleetPoints
	return c
}
