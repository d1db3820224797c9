package function

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
)

// Shards of a tick: a function whose runs are split into shards serves a consumer per shard
// (domain.Shard), pinned to one replica at a time like the command partitions (KeyOf set, so
// the runtime pins and balances them). A replica that holds several shards gets the same tick
// from each of their consumers at about the same time; Coalesce runs them together, so that
// the bucket is read once for all of them.

// Ticks is how the runtime serves a function the ticks of the schedule stream: its consumers
// of MAINT_SCHEDULE (consumers), each pinned to one replica at a time and spread over the
// replicas (the keyed mode, the consumer as the key), one tick at a time. The handler
// acknowledges every tick, the next tick being the retry of a run that failed, so a tick is
// delivered at most twice (again only when its holder died or acknowledged it too late).
func Ticks(name string, consumers []string, h Handler, drain time.Duration, log *slog.Logger, meters metric.MeterProvider) Config {
	return Config{
		Name: name, Stream: domain.ScheduleStream, Consumers: consumers, Handler: h,
		KeyOf:      func(msg Message) string { return msg.Consumer },
		MaxDeliver: 2, Concurrency: 1, DrainTimeout: drain, Logger: log, Meters: meters,
	}
}

// Shards is the shard consumers of a function as provisioning created them, and what a
// replica served of them.
type Shards struct {
	// Consumers are the names of the shard consumers, sorted.
	Consumers []string

	js      jetstream.JetStream
	stream  string
	log     *slog.Logger
	atStart map[string]domain.Shard

	mu     sync.Mutex
	served map[string]uint64
}

// FindShards finds the shard consumers of a function (names with prefix, such as
// domain.EmitterShardPrefix) on stream, and the shard each serves.
func FindShards(ctx context.Context, js jetstream.JetStream, stream, prefix string, log *slog.Logger) (*Shards, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w (run `maintctl provision`)", stream, err)
	}
	sh := &Shards{js: js, stream: stream, log: log, atStart: map[string]domain.Shard{}, served: map[string]uint64{}}
	lister := s.ConsumerNames(ctx)
	for n := range lister.Name() {
		if domain.IsShardConsumer(n, prefix) {
			sh.Consumers = append(sh.Consumers, n)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	if len(sh.Consumers) == 0 {
		return nil, fmt.Errorf("no %s* consumers on %s (run `maintctl provision`)", prefix, stream)
	}
	sort.Strings(sh.Consumers)
	for _, n := range sh.Consumers {
		if sh.atStart[n], err = sh.read(ctx, n); err != nil {
			return nil, err
		}
	}
	return sh, nil
}

// read reads the shard a consumer serves from its metadata, as it is now.
func (s *Shards) read(ctx context.Context, name string) (domain.Shard, error) {
	c, err := s.js.Consumer(ctx, s.stream, name)
	if err != nil {
		return domain.Shard{}, fmt.Errorf("consumer %s/%s: %w", s.stream, name, err)
	}
	return domain.ShardFromMetadata(name, c.CachedInfo().Config.Metadata)
}

// Of is the shard the message's consumer serves now (provisioning may have changed the count
// since this replica started), or as it was at start when the server cannot say. A message
// that came from no shard consumer (a direct call) is the whole bucket: shard 0 of 1.
func (s *Shards) Of(ctx context.Context, msg Message) domain.Shard {
	known, ok := s.atStart[msg.Consumer]
	if !ok {
		return domain.Shard{Index: 0, Of: 1}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	now, err := s.read(ctx, msg.Consumer)
	if err != nil {
		s.log.Debug("shard of the consumer: using the one read at start", "consumer", msg.Consumer, "err", err)
		return known
	}
	if now.Of != len(s.Consumers) {
		s.log.Warn("the shard count changed since this replica started: restart it to serve every shard",
			"consumer", msg.Consumer, "shards", now.Of, "served", len(s.Consumers))
	}
	return now
}

// First notes that this replica serves msg's tick for its shard, and reports false if it
// served it already: a tick delivered again (its acknowledgement was lost, or its lease ran
// out while it ran) is not run twice by one replica.
func (s *Shards) First(msg Message) bool {
	if _, ok := s.atStart[msg.Consumer]; !ok {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg.Seq <= s.served[msg.Consumer] {
		return false
	}
	s.served[msg.Consumer] = msg.Seq
	return true
}

// Coalesce runs the shards of one tick that reach this replica within Window of each other in
// one call of Run. It is safe for concurrent use; the zero Window runs each shard alone.
type Coalesce[R any] struct {
	Window time.Duration
	// Run serves the shards of the tick stored at time at together and returns one result per
	// shard, in their order. Its context ends when the contexts of every shard's caller have
	// ended.
	Run func(ctx context.Context, at time.Time, shards []domain.Shard) []R

	mu   sync.Mutex
	open map[uint64]*gathering[R]
}

type gathering[R any] struct {
	at      time.Time
	shards  []domain.Shard
	callers []context.Context
	done    chan struct{}
	results []R
}

// Do serves shard s of the tick stored at time at with stream sequence tick (the same on every
// shard's consumer): it joins the shards of the tick gathering now, or starts a gathering, and
// returns the shard's result once the run is over, or ctx's error if ctx ends first.
func (c *Coalesce[R]) Do(ctx context.Context, tick uint64, at time.Time, s domain.Shard) (R, error) {
	c.mu.Lock()
	if c.open == nil {
		c.open = map[uint64]*gathering[R]{}
	}
	g := c.open[tick]
	if g == nil {
		g = &gathering[R]{at: at, done: make(chan struct{})}
		c.open[tick] = g
		go c.gather(tick, g)
	}
	i := len(g.shards)
	g.shards = append(g.shards, s)
	g.callers = append(g.callers, ctx)
	c.mu.Unlock()
	select {
	case <-g.done:
		return g.results[i], nil
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// gather waits for the window, closes the gathering to newcomers (a shard of the same tick
// that comes later starts a gathering of its own) and runs it.
func (c *Coalesce[R]) gather(tick uint64, g *gathering[R]) {
	time.Sleep(c.Window)
	c.mu.Lock()
	delete(c.open, tick)
	shards, callers := g.shards, g.callers
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.WithoutCancel(callers[0]))
	defer cancel()
	var left atomic.Int32
	left.Store(int32(len(callers)))
	for _, cc := range callers {
		stop := context.AfterFunc(cc, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	g.results = c.Run(ctx, g.at, shards)
	close(g.done)
}
