// Package emitter is the function that republishes every tracked maintenance state over OTLP
// on each tick of the schedule (README, Metrics).
//
// A tick is served by one replica: the durable emitter consumer hands each tick to one of
// them, one at a time. A run reads the bucket in one streaming pass and sends, for every
// tracked entity, a cluster.maintenance.status point per state (1 for the current state, 0
// for the others), then the fleet view. The points are built as metric data for this run
// only and sent in requests of their own (telemetry.Emission), bounded in size and gzipped;
// no SDK instrument holds them, so nothing of one run can leak into a later one.
//
// Failure semantics: a run that cannot read the bucket or send a request within
// Config.ExportTimeout counts as failed, and the tick is acknowledged all the same. The
// next tick is the retry: it reads the state as it is then, which is what should be sent,
// and the exporter already retries transient errors inside the deadline. Redelivering the
// tick instead would only send older news later, and compete with the next tick.
package emitter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
	"maintsignals/shared/telemetry"
)

// Errors of a run.
var (
	ErrScan   = errors.New("read the bucket")
	ErrExport = errors.New("export")
)

// Emitter holds the dependencies of the tick handler.
type Emitter struct {
	cfg     Config
	store   *store.Store
	tel     *telemetry.Telemetry
	log     *slog.Logger
	health  *health
	runtime metric.MeterProvider
}

// New prepares an emitter on the provisioned bucket.
func New(ctx context.Context, js jetstream.JetStream, tel *telemetry.Telemetry, cfg Config) (*Emitter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if tel == nil {
		return nil, fmt.Errorf("%w: telemetry is required", ErrInvalidConfig)
	}
	st, err := store.Open(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("emitter: %w", err)
	}
	h, err := newHealth(tel.Meter(ScopeName))
	if err != nil {
		return nil, err
	}
	return &Emitter{
		cfg:     cfg,
		store:   st,
		tel:     tel,
		log:     cfg.Logger.With("function", "emitter"),
		health:  h,
		runtime: tel.MeterProvider(),
	}, nil
}

// Close unregisters the emitter's health callbacks.
func (e *Emitter) Close() error { return e.health.close() }

// RuntimeConfig is how the function runtime serves the emitter: the durable emitter consumer
// of the schedule stream, one tick at a time, every tick acknowledged (see the package doc).
func (e *Emitter) RuntimeConfig() function.Config {
	return function.Config{
		Name:      "emitter",
		Stream:    domain.ScheduleStream,
		Consumers: []string{domain.EmitterConsumer},
		Handler:   e.Handle,
		// The handler fails only by panicking, which the runtime treats as permanent.
		MaxDeliver:   2,
		Concurrency:  1,
		DrainTimeout: e.cfg.ExportTimeout + 5*time.Second,
		Logger:       e.cfg.Logger,
		Meters:       e.runtime,
	}
}

// Run serves ticks until ctx is cancelled (maintctl function emitter, maintctl up).
func Run(ctx context.Context, js jetstream.JetStream, tel *telemetry.Telemetry, cfg Config) error {
	e, err := New(ctx, js, tel, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = e.Close() }()
	return function.Run(ctx, js, e.RuntimeConfig())
}

// Outcomes of a run, the outcome attribute of cluster.maintenance.emitter.runs.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
	OutcomeSkipped = "skipped"
)

// Handle serves one tick. It always acknowledges it (returns nil): see the package doc.
func (e *Emitter) Handle(ctx context.Context, msg function.Message) error {
	log := e.log.With("tick_seq", msg.Seq, "tick_next", msg.Header.Get(jetstream.ScheduleNextHeader))
	if msg.Pending > 0 {
		// Ticks piled up while no emitter ran: only the newest needs a run, and it is waiting.
		e.health.record(ctx, OutcomeSkipped, 0, Result{})
		log.Debug("tick skipped: a newer tick is waiting", "pending", msg.Pending)
		return nil
	}
	res, err := e.Emit(ctx)
	if err != nil {
		log.Warn("emission failed; the next tick sends the state again", "err", err,
			"entities", res.Entities, "requests", res.Requests, "duration", res.Duration)
		return nil
	}
	log.Debug("emitted", "entities", res.Entities, "points", res.Points, "requests", res.Requests,
		"dropped", res.Dropped, "corrupt", res.Corrupt, "duration", res.Duration)
	return nil
}

// Result describes one run.
type Result struct {
	// Entities emitted, and Points and Requests sent (or staged, for the Prometheus page).
	Entities int
	Points   int
	Requests int
	// ByState counts the emitted entities per state, indexed as domain.States.
	ByState []int64
	// Dropped counts entities in None past the retention period, not emitted.
	Dropped int
	// Corrupt counts records that could not be read (or carry an unknown state), skipped.
	Corrupt  int
	Duration time.Duration
}

// Emit runs one emission: it reads the bucket as it is now, in one streaming pass, and sends
// the points in bounded requests while the scan goes on. It records the run in the health
// metrics.
func (e *Emitter) Emit(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := e.emit(ctx)
	res.Duration = time.Since(start)
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeFailure
	}
	e.health.record(ctx, outcome, res.Duration, res)
	return res, err
}

func (e *Emitter) emit(ctx context.Context) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ExportTimeout)
	defer cancel()
	now := e.cfg.Now()
	b := newBatcher(now, e.cfg)
	em := e.tel.NewEmission()
	// The exporter runs beside the scan: one batch is sent while the next is built.
	x := startExport(ctx, cancel, em)
	var res Result
	scanErr := e.scan(ctx, now, b, &res, x.send)
	if scanErr == nil {
		scanErr = x.send(b.finish())
	}
	requests, exportErr := x.wait()
	res.Requests = requests
	res.Entities, res.Points, res.ByState = b.entities, b.points, b.byState
	switch {
	case exportErr != nil:
		em.Abort()
		return res, fmt.Errorf("emitter: %w: %w", ErrExport, exportErr)
	case scanErr != nil:
		em.Abort()
		return res, fmt.Errorf("emitter: %w: %w", ErrScan, scanErr)
	}
	em.Commit()
	return res, nil
}

// scan reads the bucket into b, handing each full batch to send, and counts in res the
// records it skipped (unreadable) or dropped (retention ran out).
func (e *Emitter) scan(ctx context.Context, now time.Time, b *batcher, res *Result, send func(metricdata.ScopeMetrics) error) error {
	return e.store.Scan(ctx, func(en store.Entry, derr error) error {
		si := stateIndex(en.Record.State)
		if derr != nil || si < 0 {
			res.Corrupt++
			e.log.Warn("record skipped: cannot be read", "key", en.Key, "state", string(en.Record.State), "err", derr)
			return nil
		}
		if !emitted(en.Record, now, e.cfg.Retention) {
			res.Dropped++
			return nil
		}
		id := en.Record.ResourceID
		if id == "" {
			// A record always carries its ID; the key still names the entity if one does not.
			id, _ = domain.DecodeKey(en.Key)
		}
		if full, ok := b.add(id, si, en.Record); ok {
			return send(full)
		}
		return nil
	})
}

// export sends the batches of one run in order, beside the scan; its first failure cancels
// the run (cancel), and the batches after it are dropped.
type export struct {
	ctx      context.Context
	batches  chan metricdata.ScopeMetrics
	done     chan struct{}
	requests int
	err      error
}

func startExport(ctx context.Context, cancel context.CancelFunc, em *telemetry.Emission) *export {
	x := &export{ctx: ctx, batches: make(chan metricdata.ScopeMetrics, 1), done: make(chan struct{})}
	go func() {
		defer close(x.done)
		for sm := range x.batches {
			if x.err != nil {
				continue
			}
			if err := em.Export(ctx, sm); err != nil {
				x.err = err
				cancel() // stop the scan: this run has failed
				continue
			}
			x.requests++
		}
	}()
	return x
}

// send queues one batch, or fails when the run is over.
func (x *export) send(sm metricdata.ScopeMetrics) error {
	select {
	case x.batches <- sm:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}

// wait ends the export once the queued batches are sent: the requests that went out and the
// first failure.
func (x *export) wait() (int, error) {
	close(x.batches)
	<-x.done
	return x.requests, x.err
}

// Health metrics of the emitter, exported with the process's other SDK instruments.
const (
	MetricRuns        = "cluster.maintenance.emitter.runs"
	MetricDuration    = "cluster.maintenance.emitter.duration"
	MetricLastSuccess = "cluster.maintenance.emitter.last_success"
	MetricExported    = "cluster.maintenance.emitter.exported"
	AttrOutcome       = "outcome"
)

// durationBuckets suit runs from milliseconds (a small fleet) to a minute (the tick).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}

// health records runs. Every series has a fixed, small set of attributes.
type health struct {
	runs     metric.Int64Counter
	duration metric.Float64Histogram
	reg      metric.Registration
	// lastSuccess (unix nanoseconds) and exported describe the last successful run of this
	// replica; observed at collection, so a gauge never outlives what it reports.
	lastSuccess atomic.Int64
	exported    atomic.Int64
}

var outcomeAttrs = map[string]metric.MeasurementOption{
	OutcomeSuccess: metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, OutcomeSuccess))),
	OutcomeFailure: metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, OutcomeFailure))),
	OutcomeSkipped: metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, OutcomeSkipped))),
}

func newHealth(m metric.Meter) (*health, error) {
	h := &health{}
	var err error
	if h.runs, err = m.Int64Counter(MetricRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Emitter runs by outcome: success, failure, or skipped because a newer tick was waiting.")); err != nil {
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
		metric.WithDescription("Entities exported by the last successful run of this replica."))
	if err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	h.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		// Nothing before the first success: a zero time would read as an export in 1970.
		if ns := h.lastSuccess.Load(); ns != 0 {
			o.ObserveFloat64(last, float64(ns)/1e9)
			o.ObserveInt64(exported, h.exported.Load())
		}
		return nil
	}, last, exported)
	if err != nil {
		return nil, fmt.Errorf("emitter metrics: %w", err)
	}
	return h, nil
}

func (h *health) record(ctx context.Context, outcome string, d time.Duration, res Result) {
	attrs := outcomeAttrs[outcome]
	h.runs.Add(ctx, 1, attrs)
	if outcome == OutcomeSkipped {
		return
	}
	h.duration.Record(ctx, d.Seconds(), attrs)
	if outcome == OutcomeSuccess {
		h.exported.Store(int64(res.Entities))
		h.lastSuccess.Store(time.Now().UnixNano())
	}
}

func (h *health) close() error {
	if err := h.reg.Unregister(); err != nil {
		return fmt.Errorf("emitter metrics: %w", err)
	}
	return nil
}
