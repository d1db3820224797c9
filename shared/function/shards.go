package function

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Shards of a tick: a function whose runs are split into shards serves a consumer per shard
// (domain.Shard), pinned to one replica at a time like the command partitions (KeyOf set, so
// the runtime pins and balances them). A replica that holds several shards gets the same tick
// from each of their consumers at about the same time; Coalesce runs them together, so that
// the bucket is read once for all of them.

// ShardConsumers finds the shard consumers of a function (names with prefix, such as
// domain.EmitterShardPrefix) that provisioning created on stream, and the shard each serves.
func ShardConsumers(ctx context.Context, js jetstream.JetStream, stream, prefix string) (map[string]domain.Shard, []string, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w (run `maintctl provision`)", stream, err)
	}
	var names []string
	lister := s.ConsumerNames(ctx)
	for n := range lister.Name() {
		if domain.IsShardConsumer(n, prefix) {
			names = append(names, n)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, nil, fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no %s* consumers on %s (run `maintctl provision`)", prefix, stream)
	}
	sort.Strings(names)
	shards := make(map[string]domain.Shard, len(names))
	for _, n := range names {
		sh, err := ConsumerShard(ctx, js, stream, n)
		if err != nil {
			return nil, nil, err
		}
		shards[n] = sh
	}
	return shards, names, nil
}

// ConsumerShard reads the shard a consumer serves from its metadata, as it is now.
func ConsumerShard(ctx context.Context, js jetstream.JetStream, stream, name string) (domain.Shard, error) {
	c, err := js.Consumer(ctx, stream, name)
	if err != nil {
		return domain.Shard{}, fmt.Errorf("consumer %s/%s: %w", stream, name, err)
	}
	return domain.ShardFromMetadata(name, c.CachedInfo().Config.Metadata)
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
