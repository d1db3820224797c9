package emitter

import (
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"maintsignals/shared/domain"
)

// Metrics and attributes of the README (Metrics).
const (
	MetricStatus   = "cluster.maintenance.status"
	MetricEntities = "cluster.maintenance.entities"
	MetricPUCM     = "cluster.maintenance.pucm"

	// Times in the signal (README, Time in the signal): gauges in Unix seconds, with the status metric's
	// cloud.resource_id, so that a rule can join them to the state or compare them to time().
	MetricWindowStart = "cluster.maintenance.window.start_time"
	MetricWindowEnd   = "cluster.maintenance.window.end_time"
	MetricStateStart  = "cluster.maintenance.state.start_time"
	// Fleet gauges, without an entity attribute.
	MetricOverdue = "cluster.maintenance.overdue"
	MetricStuck   = "cluster.maintenance.stuck"

	AttrResourceID = "cloud.resource_id"
	AttrState      = "cluster.maintenance.state"
	// Attributes of the ARO-RP compatible metric, named as ARO-RP names them.
	AttrPUCMState      = "state"
	AttrPUCMResourceID = "resourceId"

	// ScopeName is the instrumentation scope of everything the emitter exports.
	ScopeName = "maintsignals/functions/emitter"
)

// pointsPerEntity is the most points one entity contributes: one status point per state, one
// PUCM point, and its window start and end and state start times.
var pointsPerEntity = len(domain.States) + 1 + timePoints

// timePoints is the most time points of one entity.
const timePoints = 3

var scope = instrumentation.Scope{Name: ScopeName}

// stateAttrs[i] is the state attribute of domain.States[i], built once.
var stateAttrs = func() []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(domain.States))
	for i, s := range domain.States {
		out[i] = attribute.String(AttrState, s.MetricValue())
	}
	return out
}()

// Encoded-size estimate of one point, for the request size cap: attribute keys, framing,
// timestamp and value come to about 90 bytes besides the attribute values; 128 leaves margin.
const (
	pointOverhead   = 128
	requestOverhead = 4 << 10 // resource, scope and metric descriptors
)

// stateIndex is the position of s in domain.States, -1 if s is not a state.
func stateIndex(s domain.State) int { return slices.Index(domain.States, s) }

// emitted reports whether a record in a valid state is part of the emission at now: every
// state but None always, None for the retention period after the entity got there.
func emitted(r domain.Record, now time.Time, retention time.Duration) bool {
	return r.State != domain.StateNone || now.Sub(r.StateSince) < retention
}

// batcher turns entities into requests of bounded size. Every point of a run carries the
// same timestamp: the moment the run read the bucket.
type batcher struct {
	now      time.Time
	pucm     bool
	stuckAt  time.Duration
	maxPts   int
	maxBytes int

	status []metricdata.DataPoint[int64]
	compat []metricdata.DataPoint[int64]
	// Time points, one slice per metric.
	winStart, winEnd, stateStart []metricdata.DataPoint[float64]
	bytes                        int

	// byState counts the entities emitted per state (indexed as domain.States), for
	// cluster.maintenance.entities. It counts what this run emitted, not every record: a None
	// entity past its retention is no longer tracked, so the fleet view always equals the
	// number of status points at 1.
	byState  []int64
	entities int
	points   int
	// overdue and stuck count the emitted entities Pending past their window, and updating
	// for longer than the stuck limit.
	overdue, stuck int64
}

func newBatcher(now time.Time, cfg Config) *batcher {
	return &batcher{
		now: now, pucm: cfg.PUCM, stuckAt: cfg.StuckAfter, maxPts: cfg.BatchSize, maxBytes: cfg.MaxRequestBytes,
		bytes: requestOverhead, byState: make([]int64, len(domain.States)),
	}
}

// add appends the points of one entity, whose record r is in state index si. When they would
// not fit in the current batch, the batch so far is returned first (ok true) and the entity
// starts the next.
func (b *batcher) add(resourceID string, si int, r domain.Record) (full metricdata.ScopeMetrics, ok bool) {
	// A time that was never set is left out rather than sent as 1970.
	hasWindow := r.Window != nil && !r.Window.Start.IsZero() && !r.Window.End.IsZero()
	hasSince := !r.StateSince.IsZero()
	n, size := b.footprint(len(resourceID), hasWindow, hasSince)
	if b.entityPoints() > 0 && (b.entityPoints()+n > b.maxPts || b.bytes+size > b.maxBytes) {
		full, ok = b.take(), true
	}
	id := attribute.String(AttrResourceID, resourceID)
	if hasWindow || hasSince {
		idSet := attribute.NewSet(id)
		if hasWindow {
			b.winStart = append(b.winStart, metricdata.DataPoint[float64]{Attributes: idSet, Time: b.now, Value: unixSeconds(r.Window.Start)})
			b.winEnd = append(b.winEnd, metricdata.DataPoint[float64]{Attributes: idSet, Time: b.now, Value: unixSeconds(r.Window.End)})
		}
		if hasSince {
			b.stateStart = append(b.stateStart, metricdata.DataPoint[float64]{Attributes: idSet, Time: b.now, Value: unixSeconds(r.StateSince)})
		}
	}
	if r.Overdue(b.now) {
		b.overdue++
	}
	if r.Stuck(b.now, b.stuckAt) {
		b.stuck++
	}
	b.addStatus(id, resourceID, si)
	b.bytes += size
	b.byState[si]++
	b.entities++
	b.points += n
	return full, ok
}

// footprint is how many points an entity takes and their estimated encoded size, for a
// resource ID of idLen bytes.
func (b *batcher) footprint(idLen int, hasWindow, hasSince bool) (n, size int) {
	n = len(domain.States)
	size = n * (pointOverhead + idLen + len("customer_action_needed"))
	if b.pucm {
		n++
		size += pointOverhead + idLen + len("customerActionNeeded")
	}
	times := 0
	if hasWindow {
		times += 2
	}
	if hasSince {
		times++
	}
	return n + times, size + times*(pointOverhead+idLen)
}

// addStatus adds the entity's state set (1 for state si, 0 for the others) and, with PUCM,
// its compatibility point.
func (b *batcher) addStatus(id attribute.KeyValue, resourceID string, si int) {
	for i := range domain.States {
		var v int64
		if i == si {
			v = 1
		}
		b.status = append(b.status, metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(id, stateAttrs[i]),
			Time:       b.now,
			Value:      v,
		})
	}
	if b.pucm {
		b.compat = append(b.compat, metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(
				attribute.String(AttrPUCMResourceID, resourceID),
				attribute.String(AttrPUCMState, domain.States[si].PUCMValue()),
			),
			Time:  b.now,
			Value: 1,
		})
	}
}

// entityPoints is the number of per-entity points in the current batch.
func (b *batcher) entityPoints() int {
	return len(b.status) + len(b.compat) + len(b.winStart) + len(b.winEnd) + len(b.stateStart)
}

// unixSeconds is t in Unix seconds, with its fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// timeGauge is one of the time metrics of a batch.
func timeGauge(name, desc string, pts []metricdata.DataPoint[float64]) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Description: desc, Unit: "s", Data: metricdata.Gauge[float64]{DataPoints: pts}}
}

// take returns the batch so far and starts a new one.
func (b *batcher) take() metricdata.ScopeMetrics {
	sm := metricdata.ScopeMetrics{Scope: scope}
	if len(b.status) > 0 {
		sm.Metrics = append(sm.Metrics, metricdata.Metrics{
			Name:        MetricStatus,
			Description: "Maintenance state of an entity: 1 for its current state, 0 for the others.",
			Unit:        "1",
			Data:        metricdata.Gauge[int64]{DataPoints: b.status},
		})
	}
	if len(b.compat) > 0 {
		sm.Metrics = append(sm.Metrics, metricdata.Metrics{
			Name:        MetricPUCM,
			Description: "Maintenance state of a cluster as ARO-RP reports it (always 1, the state is an attribute).",
			Unit:        "1",
			Data:        metricdata.Gauge[int64]{DataPoints: b.compat},
		})
	}
	if len(b.winStart) > 0 {
		sm.Metrics = append(sm.Metrics,
			timeGauge(MetricWindowStart, "Start of the announced maintenance window, in Unix seconds.", b.winStart),
			timeGauge(MetricWindowEnd, "End of the announced maintenance window, in Unix seconds.", b.winEnd))
	}
	if len(b.stateStart) > 0 {
		sm.Metrics = append(sm.Metrics, timeGauge(MetricStateStart, "When the entity entered its current maintenance state, in Unix seconds.", b.stateStart))
	}
	// Fresh slices: the batch handed out is owned by its receiver now.
	b.status, b.compat, b.bytes = nil, nil, requestOverhead
	b.winStart, b.winEnd, b.stateStart = nil, nil, nil
	return sm
}

// finish returns the last batch: the entities not sent yet and the fleet view, which is
// known only once every entity has been seen.
func (b *batcher) finish() metricdata.ScopeMetrics {
	sm := b.take()
	fleet := make([]metricdata.DataPoint[int64], len(domain.States))
	for i := range domain.States {
		fleet[i] = metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(stateAttrs[i]),
			Time:       b.now,
			Value:      b.byState[i],
		}
	}
	sm.Metrics = append(sm.Metrics, metricdata.Metrics{
		Name:        MetricEntities,
		Description: "Entities per maintenance state, counting the entities emitted in this run.",
		Unit:        "{entity}",
		Data:        metricdata.Gauge[int64]{DataPoints: fleet},
	})
	sm.Metrics = append(sm.Metrics,
		metricdata.Metrics{
			Name:        MetricOverdue,
			Description: "Entities still Pending after their announced window ended.",
			Unit:        "{entity}",
			Data:        metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Time: b.now, Value: b.overdue}}},
		},
		metricdata.Metrics{
			Name:        MetricStuck,
			Description: "Entities whose update has been in progress for longer than the stuck limit.",
			Unit:        "{entity}",
			Data:        metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Time: b.now, Value: b.stuck}}},
		})
	b.points += len(fleet) + 2
	return sm
}
