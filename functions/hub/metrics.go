package hub

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
)

// Metrics the hub exports (README, Regions).
const (
	MetricRegionAge      = "cluster.maintenance.region.age"
	MetricRegionEntities = "cluster.maintenance.region.entities"
	AttrRegion           = "cloud.region"
	AttrState            = "cluster.maintenance.state"
	// ScopeName is the instrumentation scope of the hub's metrics.
	ScopeName = "maintsignals/functions/hub"
)

// RegisterMetrics observes, at each collection, the age of every region's summary (a region
// never heard of has no age point: its absence is what the alert sees) and its entities per
// state, from the view as it is then.
func RegisterMetrics(m metric.Meter, read Reader) (metric.Registration, error) {
	age, err := m.Float64ObservableGauge(MetricRegionAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the region's summary at the hub, by the tick time inside it."))
	if err != nil {
		return nil, fmt.Errorf("hub metrics: %w", err)
	}
	entities, err := m.Int64ObservableGauge(MetricRegionEntities, metric.WithUnit("{entity}"),
		metric.WithDescription("Tracked entities per maintenance state in the region, from its newest summary."))
	if err != nil {
		return nil, fmt.Errorf("hub metrics: %w", err)
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		v, err := read(ctx)
		if err != nil {
			return err
		}
		for _, r := range v.Regions {
			if r.AgeSeconds == nil {
				continue
			}
			region := attribute.String(AttrRegion, r.Region)
			o.ObserveFloat64(age, *r.AgeSeconds, metric.WithAttributes(region))
			for _, s := range domain.States {
				o.ObserveInt64(entities, r.Counts.Counts[s], metric.WithAttributes(region, attribute.String(AttrState, s.MetricValue())))
			}
		}
		return nil
	}, age, entities)
}
