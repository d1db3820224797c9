package emitter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Health metrics of the emitter, exported with the process's other SDK instruments.
const (
	MetricRuns        = "cluster.maintenance.emitter.runs"
	MetricDuration    = "cluster.maintenance.emitter.duration"
	MetricLastSuccess = "cluster.maintenance.emitter.last_success"
	MetricExported    = "cluster.maintenance.emitter.exported"
	MetricCoverage    = "cluster.maintenance.emitter.coverage"
	AttrOutcome       = "outcome"
)

// durationBuckets suit runs from milliseconds (a small fleet) to a minute (the tick).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}

// health records runs. Every series has a fixed, small set of attributes: the outcome and
// the shard.
type health struct {
	runs     metric.Int64Counter
	duration metric.Float64Histogram
	reg      metric.Registration
	stale    time.Duration
	// lastSuccess (unix nanoseconds) is the last successful run of this replica; observed at
	// collection, so a gauge never outlives what it reports.
	lastSuccess atomic.Int64

	mu     sync.Mutex
	shards map[int]shardHealth // the last run of each shard this replica ran
}

// shardHealth is the last run of one shard on this replica.
type shardHealth struct {
	coverage float64
	exported int64 // entities, by the last successful run
	at       time.Time
}

func newHealth(m metric.Meter, stale time.Duration) (*health, error) {
	h := &health{stale: stale, shards: map[int]shardHealth{}}
	var err error
	if h.runs, err = m.Int64Counter(MetricRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Emitter runs of a shard by outcome: success, failure, or skipped because a newer tick was waiting.")); err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	if h.duration, err = m.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of emitter runs, reading the bucket and exporting."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	last, err := m.Float64ObservableGauge(MetricLastSuccess, metric.WithUnit("s"),
		metric.WithDescription("Time of the last successful export of this replica, in Unix seconds."))
	if err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	exported, err := m.Int64ObservableGauge(MetricExported, metric.WithUnit("{entity}"),
		metric.WithDescription("Entities of a shard exported by the last successful run of this replica."))
	if err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	coverage, err := m.Float64ObservableGauge(MetricCoverage, metric.WithUnit("1"),
		metric.WithDescription("Share of its shard that the last run of this replica handled and sent: 1 for a run that finished."))
	if err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	h.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h.observe(o, last, exported, coverage)
		return nil
	}, last, exported, coverage)
	if err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	return h, nil
}

// observe reports the last success and, for the shards this replica ran lately, their last
// coverage and export: a shard whose pin moved to another replica drops out after stale.
func (h *health) observe(o metric.Observer, last metric.Float64Observable, exported metric.Int64Observable, coverage metric.Float64Observable) {
	// Nothing before the first success: a zero time would read as an export in 1970.
	if ns := h.lastSuccess.Load(); ns != 0 {
		o.ObserveFloat64(last, float64(ns)/1e9)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, sh := range h.shards {
		if time.Since(sh.at) > h.stale {
			delete(h.shards, s)
			continue
		}
		attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrShard, fmt.Sprint(s))))
		o.ObserveFloat64(coverage, sh.coverage, attrs)
		o.ObserveInt64(exported, sh.exported, attrs)
	}
}

func (h *health) record(ctx context.Context, res Result, outcome string) {
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, outcome), attribute.String(AttrShard, res.Shard.String())))
	h.runs.Add(ctx, 1, attrs)
	if outcome == OutcomeSkipped {
		return
	}
	h.duration.Record(ctx, res.Duration.Seconds(), attrs)
	h.mu.Lock()
	sh := h.shards[res.Shard.Index]
	sh.coverage, sh.at = res.Coverage, time.Now()
	if outcome == OutcomeSuccess {
		sh.exported = int64(res.Entities)
	}
	h.shards[res.Shard.Index] = sh
	h.mu.Unlock()
	if outcome == OutcomeSuccess {
		h.lastSuccess.Store(time.Now().UnixNano())
	}
}

func (h *health) close() error {
	if err := h.reg.Unregister(); err != nil {
		return fmt.Errorf("emitter metrics: %w", err)
	}
	return nil
}
