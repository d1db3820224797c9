package telemetry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Emission is one complete set of points built outside the SDK (one emitter run), handed
// over batch by batch. It is not safe for concurrent use.
type Emission struct {
	t      *Telemetry
	part   string
	staged []metricdata.ScopeMetrics
}

// NewEmission starts an emission.
func (t *Telemetry) NewEmission() *Emission { return &Emission{t: t} }

// NewEmissionOf starts an emission of one part of what the process emits (the campaigns'
// burndown beside the entities' signal): on the Prometheus page, it replaces the last
// emission of the same part only.
func (t *Telemetry) NewEmissionOf(part string) *Emission { return &Emission{t: t, part: part} }

// Export hands over one batch. With OTLP it is one export request, now, with the fleet
// resource; ctx bounds it (including the exporter's retries). For the Prometheus page the
// batch is staged until Commit. Without an exporter it is dropped. Export takes ownership of
// the slices of sm.
func (e *Emission) Export(ctx context.Context, sm metricdata.ScopeMetrics) error {
	switch e.t.mode {
	case ModeOTLPGRPC, ModeOTLPHTTP:
		rm := &metricdata.ResourceMetrics{Resource: e.t.fleetRes, ScopeMetrics: []metricdata.ScopeMetrics{sm}}
		if err := e.t.push.Export(ctx, rm); err != nil {
			return fmt.Errorf("telemetry: export: %w", err)
		}
	case ModePrometheus:
		e.staged = mergeScope(e.staged, sm)
	}
	return nil
}

// Commit ends a complete emission: the Prometheus page now shows exactly its points.
func (e *Emission) Commit() {
	if e.t.snapshot != nil {
		e.t.snapshot.set(e.part, e.staged)
	}
	e.staged = nil
}

// Abort ends an incomplete emission: the Prometheus page shows none of the emitted points
// until the next complete one, rather than a state that may no longer hold.
func (e *Emission) Abort() {
	if e.t.snapshot != nil {
		e.t.snapshot.set(e.part, nil)
	}
	e.staged = nil
}

// mergeScope appends the points of sm to the staged scopes, one metric per name, because a
// Prometheus page must not list a metric family twice.
func mergeScope(staged []metricdata.ScopeMetrics, sm metricdata.ScopeMetrics) []metricdata.ScopeMetrics {
	i := -1
	for j := range staged {
		if staged[j].Scope == sm.Scope {
			i = j
			break
		}
	}
	if i < 0 {
		staged = append(staged, metricdata.ScopeMetrics{Scope: sm.Scope})
		i = len(staged) - 1
	}
	for _, m := range sm.Metrics {
		k := -1
		for j := range staged[i].Metrics {
			if staged[i].Metrics[j].Name == m.Name {
				k = j
				break
			}
		}
		if k < 0 {
			staged[i].Metrics = append(staged[i].Metrics, m)
			continue
		}
		staged[i].Metrics[k].Data = appendData(staged[i].Metrics[k].Data, m.Data)
	}
	return staged
}

// appendData concatenates the data points of two aggregations of the same kind; another
// combination keeps the first (the emitter sends only gauges).
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
	case metricdata.Sum[int64]:
		if y, ok := b.(metricdata.Sum[int64]); ok {
			x.DataPoints = append(x.DataPoints, y.DataPoints...)
			return x
		}
	case metricdata.Sum[float64]:
		if y, ok := b.(metricdata.Sum[float64]); ok {
			x.DataPoints = append(x.DataPoints, y.DataPoints...)
			return x
		}
	}
	return a
}

// snapshot is the Producer behind the Prometheus page: it returns the last committed
// emission, whole, on every scrape.
type snapshot struct {
	mu     sync.Mutex
	parts  map[string][]metricdata.ScopeMetrics
	scopes []metricdata.ScopeMetrics // every part's, by part
}

func (s *snapshot) set(part string, scopes []metricdata.ScopeMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		s.parts = map[string][]metricdata.ScopeMetrics{}
	}
	s.parts[part] = scopes
	names := slices.Sorted(maps.Keys(s.parts))
	var all []metricdata.ScopeMetrics
	for _, n := range names {
		all = append(all, s.parts[n]...)
	}
	s.scopes = all
}

// Produce implements sdkmetric.Producer. The slice is replaced, never modified, on commit,
// so handing it out is safe.
func (s *snapshot) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scopes, nil
}
