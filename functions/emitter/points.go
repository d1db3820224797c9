package emitter

import (
	"slices"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

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
	// Fleet gauges, per shard (AttrShard), without an entity attribute: readers sum them.
	MetricOverdue = "cluster.maintenance.overdue"
	MetricStuck   = "cluster.maintenance.stuck"
	// MetricConflicts counts the entities whose announced window a customer's policy, changed
	// since, no longer allows (customers' maintenance policies).
	MetricConflicts = "cluster.maintenance.conflicts"

	AttrResourceID = "cloud.resource_id"
	AttrState      = "cluster.maintenance.state"
	// AttrShard is the shard (0…N−1) of a fleet gauge and of the emitter's coverage.
	AttrShard = "cluster.maintenance.emitter.shard"
	// Attributes of the ARO-RP compatible metric, named as ARO-RP names them.
	AttrPUCMState      = "state"
	AttrPUCMResourceID = "resourceId"

	// ScopeName is the instrumentation scope of everything the emitter exports.
	ScopeName = "maintsignals/functions/emitter"
)

// Descriptions of the emitted metrics.
const (
	descStatus      = "Maintenance state of an entity: 1 for its current state, 0 for the others."
	descPUCM        = "Maintenance state of a cluster as ARO-RP reports it (always 1, the state is an attribute)."
	descWindowStart = "Start of the announced maintenance window, in Unix seconds."
	descWindowEnd   = "End of the announced maintenance window, in Unix seconds."
	descStateStart  = "When the entity entered its current maintenance state, in Unix seconds."
	descEntities    = "Entities per maintenance state in one shard, counting the entities emitted in this run."
	descOverdue     = "Entities of one shard still Pending after their announced window ended."
	descStuck       = "Entities of one shard whose update has been in progress for longer than the stuck limit."
	descConflicts   = "Entities of one shard whose announced window a customer's policy, changed since, no longer allows."
)

// pointsPerEntity is the most points one entity contributes: one status point per state, one
// PUCM point, and its window start and end and state start times.
var pointsPerEntity = len(domain.States) + 1 + timePoints

// timePoints is the most time points of one entity.
const timePoints = 3

// fleetPoints are the points of the fleet view of a shard: one per state, overdue, stuck and
// conflicts.
var fleetPoints = len(domain.States) + 3

var scope = &commonpb.InstrumentationScope{Name: ScopeName}

// Attributes and values shared by every point that carries them: a request is marshalled from
// them, never changed, so one copy serves every point and every batch at once.
var (
	stateAttrs = kvs(AttrState, func(s domain.State) string { return s.MetricValue() })
	pucmAttrs  = kvs(AttrPUCMState, func(s domain.State) string { return s.PUCMValue() })
	asInt      = [2]*metricpb.NumberDataPoint_AsInt{{AsInt: 0}, {AsInt: 1}}
)

// kvs is the string attribute key for each state, in the order of domain.States.
func kvs(key string, value func(domain.State) string) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, len(domain.States))
	for i, s := range domain.States {
		out[i] = stringKV(key, value(s))
	}
	return out
}

func stringKV(key, value string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: value}}}
}

// Encoded-size estimate of one point, for the request size cap: attribute keys, framing,
// timestamp and value come to about 90 bytes besides the attribute values; 128 leaves margin.
const (
	pointOverhead   = 128
	requestOverhead = 4 << 10 // resource, scope and metric descriptors
)

// stateIndex is the position of s in domain.States, -1 if s is not a state.
func stateIndex(s domain.State) int { return slices.Index(domain.States, s) }

// emitted reports whether a record in a valid state is part of the emission at now: every
// state but None always, None for the retention period after the entity got there; a
// forgotten entity never.
func emitted(r domain.Record, now time.Time, retention time.Duration) bool {
	return !r.Forgotten() && (r.State != domain.StateNone || now.Sub(r.StateSince) < retention)
}

// unixSeconds is t in Unix seconds, with its fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
