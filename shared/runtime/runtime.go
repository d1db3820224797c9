// Package runtime runs a function: it consumes durable JetStream pull consumers, hands each
// message to a plain handler function and turns the handler's result into an ack, a retry with
// backoff or a dead letter, in this one place. It keeps slow work off the consume callback and
// the message alive while the handler runs, drains on shutdown, and records the handler
// metrics of the README (Metrics).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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

// DeadLetterHook runs after a message has been copied to the dead-letter stream, before it is
// terminated (for example to publish a dead_lettered outcome). Its error retries the message.
type DeadLetterHook func(ctx context.Context, msg Message, reason string) error

// ErrPermanent marks an error that no retry can fix (a poison message).
var ErrPermanent = errors.New("permanent failure")

// Permanent wraps err so that the runtime dead-letters the message without retrying.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// Dead-letter headers, on the copy in the dead-letter stream.
const (
	HeaderDLQReason     = "Maint-Dlq-Reason"
	HeaderDLQStream     = "Maint-Dlq-Stream"
	HeaderDLQSeq        = "Maint-Dlq-Seq"
	HeaderDLQSubject    = "Maint-Dlq-Subject"
	HeaderDLQDeliveries = "Maint-Dlq-Deliveries"
	HeaderDLQAt         = "Maint-Dlq-At"
)

// Config configures a function run.
type Config struct {
	// Name of the function, for logs and metrics.
	Name string
	// Stream and Consumers: the durable consumers this replica serves.
	Stream    string
	Consumers []string
	Handler   Handler
	// MaxDeliver is the delivery budget: the message is dead-lettered on this delivery if the
	// handler still fails. It should be one less than the consumer's MaxDeliver.
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
	Meter        metric.Meter
}

// DefaultBackoff rides out a JetStream leader election (seconds) before giving up.
var DefaultBackoff = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

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
		c.MaxDeliver = 10
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
	if c.Meter == nil {
		c.Meter = noop.NewMeterProvider().Meter("")
	}
	return nil
}

// Run serves the consumers until ctx is cancelled, then drains: it stops pulling, lets the
// messages in hand finish (up to DrainTimeout) and returns.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	m, err := newMetrics(cfg.Meter)
	if err != nil {
		return err
	}
	r := &runner{cfg: cfg, js: js, metrics: m, log: cfg.Logger.With("function", cfg.Name)}
	// Handlers run on a context that outlives ctx by the drain timeout, so that a shutdown
	// does not abort a command half-way.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()

	var workers, balancing sync.WaitGroup
	// The balance loop ends with ctx; it is joined before Run returns.
	defer balancing.Wait()
	var ccs []jetstream.ConsumeContext
	var keyeds []*keyed
	for _, name := range cfg.Consumers {
		var cc jetstream.ConsumeContext
		var err error
		if cfg.KeyOf != nil {
			var k *keyed
			if k, cc, err = r.consumeKeyed(ctx, hctx, name); err == nil {
				keyeds = append(keyeds, k)
			}
		} else {
			cc, err = r.consume(ctx, hctx, name, &workers)
		}
		if err != nil {
			for _, c := range ccs {
				c.Stop()
			}
			// Stop does not wait for a callback blocked on a full queue: cancel the handlers so
			// the workers free it, then close the queues once no callback is sending.
			hcancel()
			r.closeQueues()
			workers.Wait()
			// A keyed callback never blocks: once its consume context is closed, nothing
			// files messages any more and the keyed consumer can be closed.
			for _, c := range ccs {
				select {
				case <-c.Closed():
				case <-time.After(5 * time.Second):
				}
			}
			for _, k := range keyeds {
				k.close(context.WithoutCancel(ctx))
			}
			if ctx.Err() != nil {
				return nil // stopped while starting: nothing was handled, nothing is lost
			}
			return err
		}
		ccs = append(ccs, cc)
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
	done := make(chan struct{})
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.DrainTimeout)
	defer dcancel()
	go func() {
		for _, cc := range ccs {
			<-cc.Closed()
		}
		r.closeQueues()
		workers.Wait()
		for _, k := range keyeds {
			k.drained(dctx)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-dctx.Done():
		r.log.Warn("drain timed out; abandoning in-flight messages to redelivery")
		hcancel()
		<-done
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer ucancel()
	for _, k := range keyeds {
		k.close(uctx)
	}
	r.log.Info("function stopped")
	return nil
}

type runner struct {
	cfg     Config
	js      jetstream.JetStream
	metrics *metrics
	log     *slog.Logger

	mu     sync.Mutex
	queues []chan held

	movedOff atomic.Int64 // Unix nanoseconds of the last moveOff

	// sending is held (read) by consume callbacks while they hand a message over, so that the
	// queues are closed only when no callback is sending on them.
	sending sync.RWMutex
	closed  bool
}

// held is a message handed to a worker, kept alive from the moment the callback received it.
type held struct {
	msg  jetstream.Msg
	stop func()
}

func (r *runner) closeQueues() {
	r.sending.Lock()
	defer r.sending.Unlock()
	r.closed = true
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.queues {
		close(q)
	}
	r.queues = nil
}

// enqueue hands msg to the workers. It may wait for a free slot, so the message is kept alive
// from here on: while it waits behind slow handlers, its ack wait must not run out.
func (r *runner) enqueue(q chan held, msg jetstream.Msg, ackWait time.Duration) {
	r.sending.RLock()
	defer r.sending.RUnlock()
	if r.closed {
		return // stopped: the server redelivers it after the ack wait
	}
	q <- held{msg: msg, stop: keepAlive(msg, ackWait)}
}

// consumer binds to the durable consumer name and returns it with its ack wait.
func (r *runner) consumer(ctx context.Context, name string) (jetstream.Consumer, time.Duration, error) {
	cons, err := r.js.Consumer(ctx, r.cfg.Stream, name)
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

// moveOffEvery bounds how often a replica leaves its server for another one.
const moveOffEvery = 10 * time.Second

// moveOff connects to another server of the cluster when consumes through this one miss their
// heartbeats: the server answers pings but not for JetStream (it is cut off from the rest of
// the cluster), so waiting on it would leave this replica idle until the partition heals.
func (r *runner) moveOff() {
	if r.js == nil {
		return
	}
	nc := r.js.Conn()
	if len(nc.Servers()) < 2 {
		return // nowhere else to go
	}
	now := time.Now().UnixNano()
	last := r.movedOff.Load()
	if now-last < int64(moveOffEvery) || !r.movedOff.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn("JetStream unreachable through this server; connecting to another", "server", nc.ConnectedUrlRedacted())
	if err := nc.ForceReconnect(); err != nil {
		r.log.Debug("force reconnect", "err", err)
	}
}

// reconnects counts the connection's reconnections: a message that came before the last one
// came on a connection that is gone.
func (r *runner) reconnects() uint64 {
	if r.js == nil {
		return 0 // queues driven without a server (the runtime's own tests)
	}
	return r.js.Conn().Stats().Reconnects
}

func (r *runner) connected() bool { return r.js == nil || r.js.Conn().IsConnected() }

func (r *runner) consume(ctx, hctx context.Context, name string, workers *sync.WaitGroup) (jetstream.ConsumeContext, error) {
	cons, ackWait, err := r.consumer(ctx, name)
	if err != nil {
		return nil, err
	}
	// The callback only hands the message over; the buffer holds what one pull may bring. When
	// every worker is busy the callback waits, with the message kept alive (see enqueue).
	q := make(chan held, r.cfg.Concurrency)
	r.mu.Lock()
	r.queues = append(r.queues, q)
	r.mu.Unlock()
	for i := 0; i < r.cfg.Concurrency; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for h := range q {
				r.process(hctx, name, h.msg, h.stop)
			}
		}()
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { r.enqueue(q, msg, ackWait) },
		// A pull of one message at a time stalls now and then until the pull expires (seen with
		// nats.go v1.55); a little more headroom avoids it. With MaxAckPending equal to the
		// concurrency (as provisioned) the server never sends more than the workers can take.
		jetstream.PullMaxMessages(r.cfg.Concurrency+2),
		jetstream.PullExpiry(10*time.Second),
		r.consumeErrors(name))
	if err != nil {
		return nil, fmt.Errorf("function %s: consume %s: %w", r.cfg.Name, name, err)
	}
	return cc, nil
}

func toMessage(msg jetstream.Msg, consumer string) Message {
	m := Message{Subject: msg.Subject(), Data: msg.Data(), Header: msg.Headers(), Consumer: consumer, Delivered: 1}
	if md, err := msg.Metadata(); err == nil {
		m.Stream, m.Seq, m.Delivered, m.Pending, m.Time = md.Stream, md.Sequence.Stream, md.NumDelivered, md.NumPending, md.Timestamp
	}
	return m
}

// process runs the handler on one message and settles it.
func (r *runner) process(ctx context.Context, consumer string, raw jetstream.Msg, stop func()) {
	msg := toMessage(raw, consumer)
	start := time.Now()
	err := r.attempt(ctx, msg)
	// Settling can take a few calls (a dead letter and its outcome): keep the message alive
	// until it is settled, so that no other replica gets it meanwhile.
	result := r.settle(ctx, raw, msg, err, false)
	stop()
	r.metrics.record(ctx, r.cfg.Stream, consumer, result, err, time.Since(start))
}

// attempt runs the handler on msg, unless msg is past the delivery budget: then the handler
// already had its last try and the process handling it died (or the dead letter failed), and a
// message that kills processes gets no other go.
func (r *runner) attempt(ctx context.Context, msg Message) error {
	if msg.Delivered > uint64(r.cfg.MaxDeliver) {
		return Permanent(fmt.Errorf("delivered %d times, past the budget of %d, without a settled result", msg.Delivered, r.cfg.MaxDeliver))
	}
	return r.call(ctx, msg)
}

// call runs the handler, turning a panic into a permanent failure: a poison message must not
// crash the process or come back forever.
func (r *runner) call(ctx context.Context, msg Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("handler panic: %v", p))
		}
	}()
	return r.cfg.Handler(ctx, msg)
}

// keepAlive tells the server the message is in progress more often than the ack wait, until
// stop is called.
func keepAlive(msg jetstream.Msg, ackWait time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// Results of a settled message, as recorded in metrics.
const (
	resultAck        = "ack"
	resultRetry      = "retry"
	resultDeadLetter = "dead_letter"
)

// settle is the one place where a handler's result becomes ack, retry or dead letter. In place
// (keyed consumers), a failed dead letter is left to the caller to try again rather than
// handed back to the server, so that the message keeps its place in its key's order.
func (r *runner) settle(ctx context.Context, raw jetstream.Msg, msg Message, err error, inPlace bool) string {
	if err == nil {
		if aerr := raw.Ack(); aerr != nil {
			r.log.Warn("ack failed; the message will be redelivered and handled idempotently", "subject", msg.Subject, "seq", msg.Seq, "err", aerr)
		}
		return resultAck
	}
	log := r.log.With("subject", msg.Subject, "seq", msg.Seq, "delivery", msg.Delivered)
	if !errors.Is(err, ErrPermanent) && msg.Delivered < uint64(r.cfg.MaxDeliver) {
		delay := r.backoff(msg.Delivered)
		log.Warn("handler failed; retrying", "err", err, "retry_in", delay)
		if nerr := raw.NakWithDelay(delay); nerr != nil {
			log.Warn("nak failed; the message will be redelivered after the ack wait", "err", nerr)
		}
		return resultRetry
	}
	reason := err.Error()
	if !errors.Is(err, ErrPermanent) {
		reason = fmt.Sprintf("gave up after %d deliveries: %s", msg.Delivered, reason)
	}
	if derr := r.deadLetter(ctx, msg, reason); derr != nil {
		// Losing the message is not an option: try again later.
		log.Error("dead-letter failed; retrying", "err", derr, "reason", reason)
		if !inPlace {
			_ = raw.NakWithDelay(r.backoff(msg.Delivered))
		}
		return resultRetry
	}
	log.Error("message dead-lettered", "reason", reason)
	if terr := raw.TermWithReason(truncate(reason, 200)); terr != nil {
		log.Warn("term failed", "err", terr)
	}
	return resultDeadLetter
}

func (r *runner) backoff(delivered uint64) time.Duration {
	i := int(delivered) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(r.cfg.Backoff) {
		i = len(r.cfg.Backoff) - 1
	}
	return r.cfg.Backoff[i]
}

func (r *runner) deadLetter(ctx context.Context, msg Message, reason string) error {
	if r.cfg.DeadLetterSubject != nil {
		out := nats.NewMsg(r.cfg.DeadLetterSubject(msg))
		out.Data = msg.Data
		for k, v := range msg.Header {
			out.Header[k] = append([]string(nil), v...)
		}
		out.Header.Set(HeaderDLQReason, truncate(reason, 4096))
		out.Header.Set(HeaderDLQStream, msg.Stream)
		out.Header.Set(HeaderDLQSeq, strconv.FormatUint(msg.Seq, 10))
		out.Header.Set(HeaderDLQSubject, msg.Subject)
		out.Header.Set(HeaderDLQDeliveries, strconv.FormatUint(msg.Delivered, 10))
		out.Header.Set(HeaderDLQAt, time.Now().UTC().Format(time.RFC3339Nano))
		// One copy per original message, however often this runs.
		out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("dlq-%s-%d", msg.Stream, msg.Seq))
		if r.cfg.DecorateDeadLetter != nil {
			r.cfg.DecorateDeadLetter(msg, out)
		}
		if _, err := r.js.PublishMsg(ctx, out); err != nil {
			return fmt.Errorf("copy to dead-letter stream: %w", err)
		}
	}
	if r.cfg.OnDeadLetter != nil {
		if err := r.cfg.OnDeadLetter(ctx, msg, reason); err != nil {
			return fmt.Errorf("dead-letter hook: %w", err)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
