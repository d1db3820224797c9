// Package function runs a function: it consumes durable JetStream pull consumers, hands each
// message to a plain handler function and turns the handler's result into an ack, a retry with
// backoff or a dead letter, in this one place. It keeps slow work off the consume callback and
// the message alive while the handler runs, drains on shutdown, and records the handler
// metrics of the README (Metrics).
package function

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Message is what a handler sees of a delivered message.
type Message struct {
	Subject   string
	Data      []byte
	Header    nats.Header
	Stream    string
	Consumer  string
	Seq       uint64 // stream sequence
	Delivered uint64 // 1 on the first delivery
	Pending   uint64 // messages still waiting behind this one on the consumer
	Time      time.Time
}

// Handler processes one message. nil acks it; an error wrapped with Permanent dead-letters it
// at once; any other error retries it with backoff until the delivery budget is spent, then
// dead-letters it.
type Handler func(ctx context.Context, msg Message) error

// Config configures a function run.
type Config struct {
	// Name of the function, for logs and metrics.
	Name string
	// Stream and Consumers: the durable consumers this replica serves.
	Stream    string
	Consumers []string
	Handler   Handler
	// MaxDeliver is the delivery budget: the message is dead-lettered on this delivery if the
	// handler still fails (default DefaultMaxDeliver). The consumer's own MaxDeliver is
	// unlimited or above it, so that the runtime, not the server, has the last word.
	MaxDeliver int
	// Backoff is the delay before retry n (the last value repeats).
	Backoff []time.Duration
	// DeadLetterSubject maps a message to where its copy goes; nil disables dead letters
	// (the message is then terminated with the reason logged).
	DeadLetterSubject func(Message) string
	// DecorateDeadLetter, when set, adjusts the dead letter's copy before it is published: a
	// function that dead-letters one message several times for different reasons (a webhook
	// per subscription) adds what tells the copies apart and gives each its own Nats-Msg-Id.
	DecorateDeadLetter func(msg Message, out *nats.Msg)
	OnDeadLetter       DeadLetterHook
	// Concurrency is how many messages of one consumer run at once (default 1).
	Concurrency int
	// KeyOf, when set, serves the consumers in key order: each consumer must be pinned to one
	// replica at a time (priority policy pinned_client); up to its MaxAckPending messages are
	// in hand, messages of different keys run at once (up to Concurrency) and messages of one
	// key run one at a time in stream order, retried in place when they fail.
	KeyOf func(Message) string
	// BalanceEvery is how often a keyed replica checks whether it holds more than its share of
	// the consumers and releases one (default 5s; negative: never).
	BalanceEvery time.Duration
	// DrainTimeout bounds how long in-flight handlers may run after shutdown starts.
	DrainTimeout time.Duration
	Logger       *slog.Logger
	// Meters provides the meter of the handler metrics, under MeterScope for every function.
	Meters metric.MeterProvider
}

// DefaultMaxDeliver is the delivery budget of a message whose handler keeps failing for a
// reason that is not its own (a command while the bucket is unreachable): with DefaultBackoff
// it rides out a NATS leader election, then the message is dead-lettered.
const DefaultMaxDeliver = 10

// startRetry is how long a replica keeps looking up its consumers at start while NATS elects
// leaders (FACTS: an election takes seconds).
const startRetry = 30 * time.Second

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid function config")

func (c *Config) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: Name is required", ErrInvalidConfig)
	case c.Stream == "" || len(c.Consumers) == 0:
		return fmt.Errorf("%w: Stream and Consumers are required", ErrInvalidConfig)
	case c.Handler == nil:
		return fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.BalanceEvery == 0 {
		c.BalanceEvery = 5 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Meters == nil {
		c.Meters = noop.NewMeterProvider()
	}
	return nil
}

// Starting is what a function's Run returns when the function could not start (its New
// failed): nil when ctx ended meanwhile, for it was asked to stop before it served anything,
// and err otherwise.
func Starting(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Run serves the consumers until ctx is cancelled, then drains: it stops pulling, lets the
// messages in hand finish (up to DrainTimeout) and returns.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	m, err := newMetrics(cfg.Meters.Meter(MeterScope))
	if err != nil {
		return err
	}
	r := &runner{cfg: cfg, js: js, metrics: m, log: cfg.Logger.With("function", cfg.Name)}
	// Handlers run on a context that outlives ctx by the drain timeout, so that a shutdown
	// does not abort a command half-way.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()

	var balancing sync.WaitGroup
	// The balance loop ends with ctx; it is joined before Run returns.
	defer balancing.Wait()
	var ccs []jetstream.ConsumeContext
	var all []served
	var keyeds []*keyed
	for _, name := range cfg.Consumers {
		s, cc, err := r.serve(ctx, hctx, name)
		if err != nil {
			// Stop what started. Stop does not wait for a callback blocked on a full queue:
			// cancel the handlers first, so the workers free it.
			for _, c := range ccs {
				c.Stop()
			}
			hcancel()
			r.stop(ctx, ccs, all, 5*time.Second, hcancel)
			if ctx.Err() != nil {
				return nil // stopped while starting: nothing was handled, nothing is lost
			}
			return err
		}
		ccs, all = append(ccs, cc), append(all, s)
		if k, ok := s.(*keyed); ok {
			keyeds = append(keyeds, k)
		}
	}
	r.log.Info("function started", "stream", cfg.Stream, "consumers", len(cfg.Consumers))
	statusFrom(ctx).set(cfg, true, false)
	if len(keyeds) > 0 && cfg.BalanceEvery > 0 {
		balancing.Add(1)
		go func() {
			defer balancing.Done()
			r.balance(ctx, keyeds, cfg.BalanceEvery)
		}()
	}
	<-ctx.Done()
	r.log.Info("function draining")
	statusFrom(ctx).set(cfg, false, true)
	for _, cc := range ccs {
		cc.Drain()
	}
	r.stop(ctx, ccs, all, cfg.DrainTimeout, hcancel)
	r.log.Info("function stopped")
	return nil
}

// WithinTick is the deadline of one run of a tick-driven function: def, but at most three
// quarters of the tick (when known), so that a run that misses it is over before the next tick.
func WithinTick(def, tick time.Duration) time.Duration {
	if tick > 0 {
		return min(def, tick*3/4)
	}
	return def
}

// served is one consumer as a replica serves it: in key order (keyed) or not (plain). Both
// start in serve and end in stop, the one sequence of every function.
type served interface {
	// drained returns once the messages in hand are settled, or ctx ends.
	drained(ctx context.Context)
	// close ends it for good (a keyed consumer hands its pin over).
	close(ctx context.Context)
}

// serve starts consuming name, keyed when the function has keys.
func (r *runner) serve(ctx, hctx context.Context, name string) (served, jetstream.ConsumeContext, error) {
	if r.cfg.KeyOf != nil {
		return r.consumeKeyed(ctx, hctx, name)
	}
	return r.consumePlain(ctx, hctx, name)
}

// stop waits until every consume has closed (nothing is filed any more) and every consumer has
// settled what it holds, then closes them. When timeout runs out first, it cancels
// the handlers (cancel), which leaves their messages to redelivery and ends the wait.
func (r *runner) stop(ctx context.Context, ccs []jetstream.ConsumeContext, all []served, timeout time.Duration, cancel func()) {
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer dcancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, cc := range ccs {
			select {
			case <-cc.Closed():
			case <-time.After(5 * time.Second): // a consume that never closes must not hang the stop
			}
		}
		for _, s := range all {
			s.drained(dctx)
		}
	}()
	select {
	case <-done:
	case <-dctx.Done():
		r.log.Warn("drain timed out; abandoning in-flight messages to redelivery")
		cancel()
		<-done
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer ucancel()
	for _, s := range all {
		s.close(uctx)
	}
}

type runner struct {
	cfg     Config
	js      jetstream.JetStream
	metrics *metrics
	log     *slog.Logger

	movedOff atomic.Int64 // Unix nanoseconds of the last moveOff
}

// consumer binds to the durable consumer name and returns it with its ack wait. A look-up
// that fails for a passing reason (a leader election, a node restarting: the request times out
// or finds no responder) is tried again for up to startRetry; a consumer or stream that does
// not exist fails at once (provisioning has not run).
func (r *runner) consumer(ctx context.Context, name string) (jetstream.Consumer, time.Duration, error) {
	var (
		cons jetstream.Consumer
		err  error
	)
	deadline := time.Now().Add(startRetry)
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a request lost in a restart
		cons, err = r.js.Consumer(lctx, r.cfg.Stream, name)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
			ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		r.log.Warn("consumer look-up failed; trying again", "consumer", name, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("function %s: consumer %s/%s: %w", r.cfg.Name, r.cfg.Stream, name, err)
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	return cons, ackWait, nil
}

// consumeErrors logs what a consume of consumer name reports (nats.go itself reconnects) and
// passes it to also, if given.
func (r *runner) consumeErrors(name string, also ...func(error)) jetstream.PullConsumeOpt {
	return jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		for _, f := range also {
			f(err)
		}
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			r.log.Warn("consume: missed heartbeats; reconnecting", "consumer", name)
			r.moveOff()
			return
		}
		r.log.Debug("consume", "consumer", name, "err", err)
	})
}

func toMessage(msg jetstream.Msg, consumer string) Message {
	m := Message{Subject: msg.Subject(), Data: msg.Data(), Header: msg.Headers(), Consumer: consumer, Delivered: 1}
	if md, err := msg.Metadata(); err == nil {
		m.Stream, m.Seq, m.Delivered, m.Pending, m.Time = md.Stream, md.Sequence.Stream, md.NumDelivered, md.NumPending, md.Timestamp
	}
	return m
}
