package campaign

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	core "maintsignals/shared/campaign"
)

// Metrics of the README (Fleet campaigns) and of the function's health.
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
	em := tel.NewEmissionOf("campaigns")
	if err := em.Export(ctx, burndown(cs, now)); err != nil {
		em.Abort()
		return fmt.Errorf("export the burndown: %w", err)
	}
	em.Commit()
	return nil
}

// burndown is the points of the campaigns at now.
func burndown(cs []*core.Campaign, now time.Time) metricdata.ScopeMetrics {
	var ents, status []metricdata.DataPoint[int64]
	var deadline []metricdata.DataPoint[float64]
	for _, c := range cs {
		id := attribute.String(AttrCampaign, c.ID)
		counts := c.Tally.Total()
		for _, p := range core.Phases {
			ents = append(ents, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(id, attribute.String(AttrPhase, string(p))), Time: now, Value: int64(counts.Of(p))})
		}
		for _, s := range core.Statuses {
			v := int64(0)
			if c.Status == s {
				v = 1
			}
			status = append(status, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(id, attribute.String(AttrStatus, string(s))), Time: now, Value: v})
		}
		deadline = append(deadline, metricdata.DataPoint[float64]{Attributes: attribute.NewSet(id), Time: now, Value: float64(c.Compiled().Deadline.Unix())})
	}
	return metricdata.ScopeMetrics{Scope: instrumentation.Scope{Name: ScopeName}, Metrics: []metricdata.Metrics{
		{Name: MetricEntities, Unit: "{entity}", Description: "Entities of a campaign per phase (the burndown).", Data: metricdata.Gauge[int64]{DataPoints: ents}},
		{Name: MetricStatus, Unit: "1", Description: "A campaign's status: 1 for the current one, 0 for the others.", Data: metricdata.Gauge[int64]{DataPoints: status}},
		{Name: MetricDeadline, Unit: "s", Description: "A campaign's deadline, in Unix seconds.", Data: metricdata.Gauge[float64]{DataPoints: deadline}},
	}}
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
