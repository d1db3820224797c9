package campaign

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	core "maintsignals/shared/campaign"
)

// Metrics of infra/docs/campaigns.md and of the function's health.
const (
	// The burndown, every tick, from the stored counts: entities per phase (every phase, so
	// that it sums to the selection), the status as a state set, and the deadline.
	MetricEntities = "cluster.maintenance.campaign.entities"
	MetricStatus   = "cluster.maintenance.campaign.status"
	MetricDeadline = "cluster.maintenance.campaign.deadline"
	AttrCampaign   = "maintenance.campaign.id"
	AttrPhase      = "maintenance.campaign.phase"
	AttrStatus     = "maintenance.campaign.status"

	// The function's health: ticks served by outcome, and the time of the last complete one.
	MetricRuns    = "cluster.maintenance.campaign.runs"
	MetricLastRun = "cluster.maintenance.campaign.last_run"
	AttrOutcome   = "outcome"

	// ScopeName is the instrumentation scope of the function's metrics.
	ScopeName = "maintsignals/functions/campaign"
	scopeName = ScopeName
)

// Outcomes of a tick.
const (
	outcomeSuccess = "success"
	outcomeFailure = "failure"
	outcomeSkipped = "skipped"
)

// export sends the burndown of every campaign, as stored, at now: those finished longer than
// the retention ago are left out.
func (f *Function) export(ctx context.Context, ids []string, now time.Time) error {
	tel := f.cfg.Telemetry
	if tel == nil {
		return nil
	}
	var cs []*core.Campaign
	for _, id := range ids {
		c, _, err := f.store.Campaign(ctx, id)
		if err != nil {
			return err
		}
		if c != nil && !(c.Finished && now.Sub(c.UpdatedAt) > f.cfg.Retention) {
			cs = append(cs, c)
		}
	}
	em := tel.NewEmission("campaigns", 3*f.cfg.Tick) // another replica's page drops it after three ticks
	if err := em.Export(ctx, burndown(cs, now)); err != nil {
		em.Abort()
		return fmt.Errorf("export the burndown: %w", err)
	}
	em.Commit()
	return nil
}

// burndown is the points of the campaigns at now.
func burndown(cs []*core.Campaign, now time.Time) *metricpb.ScopeMetrics {
	ts := uint64(now.UnixNano())
	point := func(v int64, kv ...*commonpb.KeyValue) *metricpb.NumberDataPoint {
		return &metricpb.NumberDataPoint{Attributes: kv, TimeUnixNano: ts, Value: &metricpb.NumberDataPoint_AsInt{AsInt: v}}
	}
	var ents, status, deadline []*metricpb.NumberDataPoint
	for _, c := range cs {
		id := stringKV(AttrCampaign, c.ID)
		counts := c.Tally.Total()
		for _, p := range core.Phases {
			ents = append(ents, point(int64(counts.Of(p)), id, stringKV(AttrPhase, string(p))))
		}
		for _, st := range core.Statuses {
			v := int64(0)
			if c.Status == st {
				v = 1
			}
			status = append(status, point(v, id, stringKV(AttrStatus, string(st))))
		}
		deadline = append(deadline, &metricpb.NumberDataPoint{Attributes: []*commonpb.KeyValue{id}, TimeUnixNano: ts,
			Value: &metricpb.NumberDataPoint_AsDouble{AsDouble: float64(c.Compiled().Deadline.Unix())}})
	}
	gauge := func(name, unit, desc string, pts []*metricpb.NumberDataPoint) *metricpb.Metric {
		return &metricpb.Metric{Name: name, Unit: unit, Description: desc, Data: &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: pts}}}
	}
	return &metricpb.ScopeMetrics{Scope: &commonpb.InstrumentationScope{Name: ScopeName}, Metrics: []*metricpb.Metric{
		gauge(MetricEntities, "{entity}", "Entities of a campaign per phase (the burndown).", ents),
		gauge(MetricStatus, "1", "A campaign's status: 1 for the current one, 0 for the others.", status),
		gauge(MetricDeadline, "s", "A campaign's deadline, in Unix seconds.", deadline),
	}}
}

func stringKV(key, value string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: value}}}
}

// health records the function's ticks.
type health struct {
	runs    metric.Int64Counter
	reg     metric.Registration
	lastRun atomic.Int64 // unix nanoseconds of the last complete tick of this replica
}

func newHealth(m metric.Meter) (*health, error) {
	h := &health{}
	var err error
	if h.runs, err = m.Int64Counter(MetricRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Campaign function ticks by outcome: success, failure, or skipped because a newer tick was waiting.")); err != nil {
		return nil, fmt.Errorf("campaign metrics: %w", err)
	}
	last, err := m.Float64ObservableGauge(MetricLastRun, metric.WithUnit("s"),
		metric.WithDescription("Time of this replica's last complete pass over the campaigns, in Unix seconds."))
	if err != nil {
		return nil, fmt.Errorf("campaign metrics: %w", err)
	}
	h.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if ns := h.lastRun.Load(); ns != 0 {
			o.ObserveFloat64(last, float64(ns)/1e9)
		}
		return nil
	}, last)
	if err != nil {
		return nil, fmt.Errorf("campaign metrics: %w", err)
	}
	return h, nil
}

func (h *health) record(ctx context.Context, outcome string, _ time.Duration) {
	h.runs.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrOutcome, outcome)))
	if outcome == outcomeSuccess {
		h.lastRun.Store(time.Now().UnixNano())
	}
}

func (h *health) close() { _ = h.reg.Unregister() }
