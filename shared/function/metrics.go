package function

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DurationBuckets are the bucket boundaries the messaging semantic conventions recommend for
// messaging.process.duration, in seconds.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

type metrics struct {
	duration metric.Float64Histogram
}

// MeterScope is the instrumentation scope of the handler metrics, the same for every function,
// so that one query sees them all.
const MeterScope = "maintsignals/shared/function"

func newMetrics(m metric.Meter) (*metrics, error) {
	d, err := m.Float64Histogram("messaging.process.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of processing operation."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("runtime metrics: %w", err)
	}
	return &metrics{duration: d}, nil
}

// record notes one processed message. Attributes follow the messaging semantic conventions and
// carry no entity id, so the series stay few however large the fleet.
func (m *metrics) record(ctx context.Context, stream, consumer, result string, err error, d time.Duration) {
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", stream),
		attribute.String("messaging.consumer.group.name", consumer),
		attribute.String("maint.result", result),
	}
	if err != nil {
		typ := "retryable"
		if errors.Is(err, ErrPermanent) {
			typ = "permanent"
		}
		attrs = append(attrs, attribute.String("error.type", typ))
	}
	m.duration.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}
