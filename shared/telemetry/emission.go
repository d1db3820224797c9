package telemetry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// Emission is one complete set of points built outside the SDK (one emitter run of a shard),
// handed over batch by batch as OTLP scope metrics. Its methods are safe for concurrent use.
type Emission struct {
	t    *Telemetry
	part string
	keep time.Duration

	mu     sync.Mutex
	staged []metricdata.ScopeMetrics
}

// NewEmission starts an emission of one part of the signal (a shard): on the Prometheus page,
// its points replace the last emission of the same part when it commits, and are shown for
// keep (0: until the next emission of the part), so that a part this process no longer emits
// does not stay on the page.
func (t *Telemetry) NewEmission(part string, keep time.Duration) *Emission {
	return &Emission{t: t, part: part, keep: keep}
}

// Export hands over one batch. With OTLP it is one export request, now, with the fleet
// resource; ctx bounds it (including retries of transient failures). For the Prometheus page
// the batch is copied and staged until Commit. Without an exporter it is dropped. The caller
// may reuse sm once Export returns.
func (e *Emission) Export(ctx context.Context, sm *metricpb.ScopeMetrics) error {
	switch e.t.mode {
	case ModeOTLPGRPC, ModeOTLPHTTP:
		req := &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricpb.ResourceMetrics{{
			Resource:     e.t.fleetPB,
			SchemaUrl:    e.t.fleetRes.SchemaURL(),
			ScopeMetrics: []*metricpb.ScopeMetrics{sm},
		}}}
		if err := e.t.push.push(ctx, req); err != nil {
			return fmt.Errorf("telemetry: export: %w", err)
		}
	case ModePrometheus:
		md := fromProto(sm)
		e.mu.Lock()
		e.staged = mergeScope(e.staged, md)
		e.mu.Unlock()
	}
	return nil
}

// Commit ends a complete emission: the Prometheus page now shows its points for its part.
func (e *Emission) Commit() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t.snapshot != nil {
		e.t.snapshot.set(e.part, clip(e.staged), e.keep)
	}
	e.staged = nil
}

// Abort ends an incomplete emission: the Prometheus page shows none of its part's points
// until the next complete one, rather than a state that may no longer hold.
func (e *Emission) Abort() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t.snapshot != nil {
		e.t.snapshot.set(e.part, nil, 0)
	}
	e.staged = nil
}

// resourceProto is the OTLP form of a resource's attributes.
func resourceProto(attrs []attribute.KeyValue) *resourcepb.Resource {
	out := &resourcepb.Resource{}
	for _, kv := range attrs {
		out.Attributes = append(out.Attributes, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.Emit()}}
}

// fromProto copies OTLP gauges of string attributes (what emissions hold) into the SDK's
// data model, for the Prometheus page.
func fromProto(sm *metricpb.ScopeMetrics) metricdata.ScopeMetrics {
	out := metricdata.ScopeMetrics{Scope: instrumentation.Scope{Name: sm.GetScope().GetName(), Version: sm.GetScope().GetVersion()}}
	for _, m := range sm.Metrics {
		pts := m.GetGauge().GetDataPoints()
		md := metricdata.Metrics{Name: m.Name, Description: m.Description, Unit: m.Unit}
		if len(pts) > 0 && isDouble(pts[0]) {
			g := metricdata.Gauge[float64]{DataPoints: make([]metricdata.DataPoint[float64], len(pts))}
			for i, p := range pts {
				g.DataPoints[i] = metricdata.DataPoint[float64]{Attributes: attrSet(p.Attributes), Time: time.Unix(0, int64(p.TimeUnixNano)), Value: p.GetAsDouble()}
			}
			md.Data = g
		} else {
			g := metricdata.Gauge[int64]{DataPoints: make([]metricdata.DataPoint[int64], len(pts))}
			for i, p := range pts {
				g.DataPoints[i] = metricdata.DataPoint[int64]{Attributes: attrSet(p.Attributes), Time: time.Unix(0, int64(p.TimeUnixNano)), Value: p.GetAsInt()}
			}
			md.Data = g
		}
		out.Metrics = append(out.Metrics, md)
	}
	return out
}

func isDouble(p *metricpb.NumberDataPoint) bool {
	_, ok := p.Value.(*metricpb.NumberDataPoint_AsDouble)
	return ok
}

func attrSet(kvs []*commonpb.KeyValue) attribute.Set {
	attrs := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		attrs[i] = attribute.String(kv.Key, kv.GetValue().GetStringValue())
	}
	return attribute.NewSet(attrs...)
}

// mergeScope appends the points of sm to the staged scopes, one metric per name, because a
// Prometheus page must not list a metric family twice.
func mergeScope(staged []metricdata.ScopeMetrics, sm metricdata.ScopeMetrics) []metricdata.ScopeMetrics {
	i := slices.IndexFunc(staged, func(s metricdata.ScopeMetrics) bool { return s.Scope == sm.Scope })
	if i < 0 {
		staged = append(staged, metricdata.ScopeMetrics{Scope: sm.Scope})
		i = len(staged) - 1
	}
	for _, m := range sm.Metrics {
		k := slices.IndexFunc(staged[i].Metrics, func(have metricdata.Metrics) bool { return have.Name == m.Name })
		if k < 0 {
			staged[i].Metrics = append(staged[i].Metrics, m)
			continue
		}
		staged[i].Metrics[k].Data = appendData(staged[i].Metrics[k].Data, m.Data)
	}
	return staged
}

// appendData concatenates the data points of two gauges of the same kind (emissions hold
// only gauges); another combination keeps the first.
func appendData(a, b metricdata.Aggregation) metricdata.Aggregation {
	switch x := a.(type) {
	case metricdata.Gauge[int64]:
		if y, ok := b.(metricdata.Gauge[int64]); ok {
			x.DataPoints = append(x.DataPoints, y.DataPoints...)
			return x
		}
	case metricdata.Gauge[float64]:
		if y, ok := b.(metricdata.Gauge[float64]); ok {
			x.DataPoints = append(x.DataPoints, y.DataPoints...)
			return x
		}
	}
	return a
}

// clip caps every slice of the scopes at its length, so that merging them on a scrape
// (appendData) copies instead of writing into their spare capacity.
func clip(scopes []metricdata.ScopeMetrics) []metricdata.ScopeMetrics {
	for i := range scopes {
		for k, m := range scopes[i].Metrics {
			switch g := m.Data.(type) {
			case metricdata.Gauge[int64]:
				g.DataPoints = slices.Clip(g.DataPoints)
				scopes[i].Metrics[k].Data = g
			case metricdata.Gauge[float64]:
				g.DataPoints = slices.Clip(g.DataPoints)
				scopes[i].Metrics[k].Data = g
			}
		}
		scopes[i].Metrics = slices.Clip(scopes[i].Metrics)
	}
	return slices.Clip(scopes)
}

// snapshot is the Producer behind the Prometheus page: on every scrape it returns the last
// committed emission of every part, merged, leaving out parts past their keep.
type snapshot struct {
	mu    sync.Mutex
	parts map[string]part
}

type part struct {
	scopes  []metricdata.ScopeMetrics
	expires time.Time // zero: never
}

func (s *snapshot) set(name string, scopes []metricdata.ScopeMetrics, keep time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		s.parts = map[string]part{}
	}
	if scopes == nil {
		delete(s.parts, name)
		return
	}
	p := part{scopes: scopes}
	if keep > 0 {
		p.expires = time.Now().Add(keep)
	}
	s.parts[name] = p
}

// Produce implements sdkmetric.Producer. A part's scopes are replaced, never modified, and
// clipped, so merging them never writes into them.
func (s *snapshot) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var out []metricdata.ScopeMetrics
	for _, name := range slices.Sorted(maps.Keys(s.parts)) {
		p := s.parts[name]
		if !p.expires.IsZero() && now.After(p.expires) {
			delete(s.parts, name)
			continue
		}
		for _, sm := range p.scopes {
			out = mergeScope(out, sm)
		}
	}
	return out, nil
}
