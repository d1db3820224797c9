package command

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"maintsignals/shared/domain"
)

// metrics are the command function's own metrics (README, Metrics). Attributes carry no entity id.
type metrics struct {
	transitions metric.Int64Counter
	commands    metric.Int64Counter
}

// newMetrics creates the instruments on m (a no-op meter when nil).
func newMetrics(m metric.Meter) (*metrics, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	t, err := m.Int64Counter("cluster.maintenance.transitions",
		metric.WithDescription("Applied commands by transition."), metric.WithUnit("{transition}"))
	if err != nil {
		return nil, fmt.Errorf("command metrics: %w", err)
	}
	c, err := m.Int64Counter("cluster.maintenance.commands",
		metric.WithDescription("Commands handled, by outcome and rejection code."), metric.WithUnit("{command}"))
	if err != nil {
		return nil, fmt.Errorf("command metrics: %w", err)
	}
	return &metrics{transitions: t, commands: c}, nil
}

func (m *metrics) transition(ctx context.Context, tr domain.Transition, task domain.Task) {
	if m == nil {
		return
	}
	m.transitions.Add(ctx, 1, metric.WithAttributes(
		attribute.String("cluster.maintenance.from", tr.From.MetricValue()),
		attribute.String("cluster.maintenance.to", tr.To.MetricValue()),
		attribute.String("cluster.maintenance.task", string(task)),
	))
}

func (m *metrics) command(ctx context.Context, outcome domain.Outcome, code domain.Code) {
	if m == nil {
		return
	}
	m.commands.Add(ctx, 1, metric.WithAttributes(
		attribute.String("cluster.maintenance.outcome", string(outcome)),
		attribute.String("cluster.maintenance.code", string(code)),
	))
}
