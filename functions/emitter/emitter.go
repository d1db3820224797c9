// Package emitter is the function that republishes every tracked maintenance state over OTLP
// on each tick of the schedule (README, Metrics).
//
// A tick is shared in shards (README, Sharing a tick): each shard has a durable consumer of
// the ticks, pinned to one replica at a time, and the replica that holds it emits the
// entities whose key hashes to the shard. A replica holding several shards reads the bucket
// once for all of them (function.Coalesce). A run reads the bucket in one streaming pass
// (store.Sweep) and sends, for every tracked entity of its shards, a
// cluster.maintenance.status point per state (1 for the current state, 0 for the others) and
// its times, then each shard's fleet view. The points are built as OTLP requests for this run
// only (batch.go), bounded in size and gzipped; no SDK instrument holds them, so nothing of
// one run can leak into a later one.
//
// Failure semantics: a run that cannot read the bucket or send a request within
// Config.ExportTimeout counts as failed, and the tick is acknowledged all the same. The
// next tick is the retry: it reads the state as it is then, which is what should be sent,
// and the exporter already retries transient errors inside the deadline. Redelivering the
// tick instead would only send older news later, and compete with the next tick. A run that
// stopped short makes the next one start where it stopped, so that no entity is always the
// one left out; cluster.maintenance.emitter.coverage says how much of its shard a run sent.
package emitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

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
	js      jetstream.JetStream // publishes the region's summary
	store   *store.Store
	tel     *telemetry.Telemetry
	log     *slog.Logger
	health  *health
	streams *streamStats
	runtime metric.MeterProvider

	// shards are the shard consumers provisioning created.
	shards   *function.Shards
	coalesce *function.Coalesce[Result]
	// from is where the next run starts reading the bucket: where the last one stopped.
	from atomic.Uint64
	// pool keeps request arenas from run to run.
	pool chan *batch
	// policies is the view of the customers' policies, synced at the start of each run: the
	// entities whose window one conflicts with (cluster.maintenance.conflicts).
	policies *store.Policies
}

// New prepares an emitter on the provisioned bucket and shard consumers.
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
	log := cfg.Logger.With("function", "emitter")
	shards, err := function.FindShards(ctx, js, domain.ScheduleStream, domain.EmitterShardPrefix, log)
	if err != nil {
		return nil, fmt.Errorf("emitter: %w", err)
	}
	h, err := newHealth(tel.Meter(ScopeName), cfg.stale())
	if err != nil {
		return nil, err
	}
	view, err := store.OpenPolicies(ctx, js, log)
	if err != nil {
		return nil, fmt.Errorf("emitter: %w", err)
	}
	ss, err := newStreamStats(tel.Meter(ScopeName), js, log)
	if err != nil {
		_ = h.close()
		return nil, err
	}
	e := &Emitter{
		cfg: cfg, js: js, store: st, tel: tel, log: log, health: h, streams: ss,
		runtime: tel.MeterProvider(), shards: shards, pool: make(chan *batch, 8), policies: view,
	}
	e.coalesce = &function.Coalesce[Result]{Window: cfg.gatherWindow(), Run: e.run}
	return e, nil
}

// Close unregisters the emitter's health and stream callbacks.
func (e *Emitter) Close() error { return errors.Join(e.health.close(), e.streams.close()) }

// RuntimeConfig is how the function runtime serves the emitter: every shard consumer of the
// schedule stream, each pinned to one replica at a time and spread over the replicas (the
// runtime's keyed mode, the consumer as the key), one tick at a time, every tick
// acknowledged (see the package doc).
func (e *Emitter) RuntimeConfig() function.Config {
	// The handler fails only by panicking, which the runtime treats as permanent.
	return function.Ticks("emitter", e.shards.Consumers, e.Handle, e.cfg.ExportTimeout+5*time.Second, e.cfg.Logger, e.runtime)
}

// Run serves ticks until ctx is cancelled (maintctl function emitter, maintctl up).
func Run(ctx context.Context, js jetstream.JetStream, tel *telemetry.Telemetry, cfg Config) error {
	e, err := New(ctx, js, tel, cfg)
	if err != nil {
		return function.Starting(ctx, err)
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

// Handle serves one shard of one tick. It always acknowledges it (returns nil): see the
// package doc.
func (e *Emitter) Handle(ctx context.Context, msg function.Message) error {
	shard := e.shards.Of(ctx, msg)
	log := e.log.With("shard", shard.Index, "tick_seq", msg.Seq, "tick_next", msg.Header.Get(jetstream.ScheduleNextHeader))
	if msg.Pending > 0 {
		// Ticks piled up while no emitter ran: only the newest needs a run, and it is waiting.
		e.health.record(ctx, Result{Shard: shard}, OutcomeSkipped)
		log.Debug("tick skipped: a newer tick is waiting", "pending", msg.Pending)
		return nil
	}
	if msg.Delivered > 1 || !e.shards.First(msg) {
		// A tick delivered again: its holder died, or its acknowledgement came too late. The
		// holder may have sent the shard already; the next tick sends it in any case, so no
		// shard of a tick is sent twice.
		e.health.record(ctx, Result{Shard: shard}, OutcomeSkipped)
		log.Debug("tick skipped: delivered again", "delivered", msg.Delivered)
		return nil
	}
	if e.cfg.PlantLeak && shard.Index == 0 {
		go func() { select {} }()
	}
	// The points of a tick carry its time, whichever replica emits which shard.
	res, err := e.coalesce.Do(ctx, msg.Seq, cmp.Or(msg.Time, e.cfg.Now()), shard)
	switch {
	case err != nil:
		log.Warn("emission abandoned: the tick is no longer this replica's", "err", err)
	case res.Err != nil:
		log.Warn("emission failed; the next tick sends the state again", "err", res.Err,
			"entities", res.Entities, "requests", res.Requests, "coverage", res.Coverage, "duration", res.Duration)
	default:
		log.Debug("emitted", "entities", res.Entities, "points", res.Points, "requests", res.Requests,
			"dropped", res.Dropped, "corrupt", res.Corrupt, "duration", res.Duration)
	}
	return nil
}

// Result describes the run of one shard.
type Result struct {
	Shard domain.Shard
	// Entities emitted, and Points and Requests sent (or staged, for the Prometheus page).
	Entities int
	Points   int
	Requests int
	// ByState counts the tracked entities per state (those in None past the retention too),
	// indexed as domain.States.
	ByState []int64
	// Dropped counts the entities not emitted: in None past the retention period, or forgotten.
	Dropped int
	// Corrupt counts records that could not be read (or carry an unknown state), skipped.
	Corrupt int
	// Coverage is the share of the shard's records the run handled and sent: 1 for a run
	// that finished, an estimate below 1 for one that stopped short.
	Coverage float64
	Duration time.Duration
	// Err is why the run failed; nil for a run that sent its whole shard.
	Err error
}

// Emit runs one emission of the whole bucket as a single shard and records it in the health
// metrics.
func (e *Emitter) Emit(ctx context.Context) (Result, error) {
	res := e.EmitShards(ctx, []domain.Shard{{Index: 0, Of: 1}})[0]
	return res, res.Err
}

// EmitShards runs one emission of the given shards together, reading the bucket once, and
// records each in the health metrics. Its points carry the time it starts.
func (e *Emitter) EmitShards(ctx context.Context, shards []domain.Shard) []Result {
	return e.run(ctx, e.cfg.Now(), shards)
}

// run emits the shards together within the export timeout, at time at: every point carries
// it, and it judges retention, overdue and stuck.
func (e *Emitter) run(ctx context.Context, at time.Time, shards []domain.Shard) []Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ExportTimeout)
	defer cancel()
	if err := e.policies.Sync(ctx); err != nil {
		// The conflicts are counted on the view as it stands; the next run catches up.
		e.log.Warn("policies not caught up; conflicts counted on the view as it is", "err", err)
	}
	r := e.newRun(ctx, cancel, at, shards)
	r.sweep(e.from.Load())
	if next, ok := r.stoppedAt(); ok {
		e.from.Store(next)
	}
	out := r.results(time.Since(start))
	for _, res := range out {
		e.health.record(ctx, res, outcomeOf(res))
	}
	e.summarize(context.WithoutCancel(ctx), at, r)
	e.compact(context.WithoutCancel(ctx), r.stats.Crowded)
	return out
}

// compactLimit bounds the records a run rewrites in each of its cells (store.Compact): far
// more than the commands of a tick at the rate the command function takes them.
const compactLimit = 10_000

// compact keeps the interior deletes of the run's cells below their records (it is given
// those the sweep found crowded), after the run. A failure is logged: the next run tries
// again.
func (e *Emitter) compact(ctx context.Context, cells []domain.Cell) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ExportTimeout)
	defer cancel()
	for _, c := range cells {
		cs, err := e.store.Compact(ctx, c, compactLimit)
		switch {
		case err != nil:
			e.log.Warn("compacting a cell's records failed; the next run tries again", "cell", c.String(), "err", err)
		case cs.Rewritten > 0:
			e.log.Info("cell compacted: its oldest records written again", "cell", c.String(), "records", cs.Records, "interior_deletes", cs.Deleted, "rewritten", cs.Rewritten)
		}
	}
}

func outcomeOf(res Result) string {
	if res.Err != nil {
		return OutcomeFailure
	}
	return OutcomeSuccess
}

// getBatch takes a request arena from the pool, or makes one.
func (e *Emitter) getBatch() *batch {
	select {
	case b := <-e.pool:
		return b
	default:
		return newBatch(e.cfg.BatchSize)
	}
}

// putBatch gives an arena back to the pool, or drops it when the pool is full.
func (e *Emitter) putBatch(b *batch) {
	select {
	case e.pool <- b:
	default:
	}
}
