package policies

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
)

// scopeName is the instrumentation scope of the policies function's own metrics.
const scopeName = "maintsignals/functions/policies"

// metrics are the policies function's own metrics: policy commands by outcome and code (no
// scope in attributes).
type metrics struct{ commands metric.Int64Counter }

func newMetrics(m metric.Meter) (*metrics, error) {
	c, err := m.Int64Counter("cluster.maintenance.policy.commands",
		metric.WithDescription("Policy commands handled, by outcome and rejection code."), metric.WithUnit("{command}"))
	if err != nil {
		return nil, fmt.Errorf("policies metrics: %w", err)
	}
	return &metrics{commands: c}, nil
}

func (m *metrics) command(ctx context.Context, outcome domain.Outcome, code domain.Code) {
	m.commands.Add(ctx, 1, metric.WithAttributes(
		attribute.String("cluster.maintenance.outcome", string(outcome)),
		attribute.String("cluster.maintenance.code", string(code)),
	))
}
