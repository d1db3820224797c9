// Package webhook is the webhook function (README, Integrating): it delivers outcome events and notices to
// integrators' endpoints as CloudEvents over HTTP(S), signed per Standard Webhooks 1.0, in
// event order per subscription and entity, at least once.
//
// Each subscription has a durable consumer of its own (webhook-<name>, on MAINT_WEBHOOK, which
// sources the events and notices and takes the subscription's replays), served by a runtime
// instance of its own: a slow or failing endpoint holds up only its subscription. The consumers are keyed by entity and pinned to one replica at a time,
// so an entity's deliveries go one after another in stream order while different entities'
// go at once, and a retry waits in place without holding up other entities.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// Defaults of a replica.
const (
	DefaultTimeout     = 15 * time.Second
	DefaultRetryFor    = 25 * time.Hour // README, Integrating: at least 24 h
	DefaultConcurrency = 32             // entities delivered at once per subscription and stream
	DefaultInFlight    = 1000           // messages out per consumer (MaxAckPending)
	DefaultAckWait     = 10 * time.Second
	webhookGroup       = "webhook"
)

// DefaultBackoff doubles from 1 s to 5 min; the last value repeats until RetryFor is spent.
var DefaultBackoff = []time.Duration{
	time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
	64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute,
}

// Config configures a replica of the webhook function.
type Config struct {
	Subscriptions []Subscription
	// FromStart makes a subscription seen for the first time start at the oldest stored event
	// instead of the next new one. A subscription that has progress keeps it.
	FromStart bool
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration
	// Backoff is the delay before each retry (the last repeats) and RetryFor how long a
	// delivery is retried before it is dead-lettered.
	Backoff  []time.Duration
	RetryFor time.Duration
	// Concurrency is how many entities of one subscription are delivered at once; InFlight how
	// many messages of one consumer may be out (held in order behind their entity's head).
	Concurrency int
	InFlight    int
	// AckWait of the consumers: how soon a replica that died gives its deliveries back.
	AckWait  time.Duration
	Replicas int // of the consumers (as the streams)
	// DrainTimeout bounds how long a stopping replica keeps delivering what it holds (default:
	// Timeout + 5 s, so that an attempt under way can finish); what is left goes back to the
	// server and to the next replica, in order.
	DrainTimeout time.Duration
	Log          *slog.Logger
	Meters       metric.MeterProvider
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.RetryFor <= 0 {
		c.RetryFor = DefaultRetryFor
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.InFlight <= 0 {
		c.InFlight = DefaultInFlight
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = c.Timeout + 5*time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Attempts is the delivery budget that makes the backoff last at least retryFor: attempt n
// waits backoff[n-1] (the last repeating) before attempt n+1.
func Attempts(backoff []time.Duration, retryFor time.Duration) int {
	var total time.Duration
	n := 1
	for total < retryFor {
		total += backoff[min(n-1, len(backoff)-1)]
		n++
	}
	return n
}

// ErrNoSubscriptions is returned when there is nothing to deliver to.
var ErrNoSubscriptions = errors.New("webhook function: no subscription (give --subscriptions FILE)")

// Run ensures each subscription's consumers and delivers until ctx ends, then drains.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg.defaults()
	if len(cfg.Subscriptions) == 0 {
		return ErrNoSubscriptions
	}
	if _, err := js.Stream(ctx, domain.WebhookStream); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("webhook function: stream %s: %w (run `maintctl provision`)", domain.WebhookStream, err)
	}
	var runs []function.Config
	// Checking fills in each subscription: on a copy, never the caller's.
	cfg.Subscriptions = slices.Clone(cfg.Subscriptions)
	for i := range cfg.Subscriptions {
		sub := &cfg.Subscriptions[i]
		if sub.key == nil { // built in code rather than read from a file
			if err := sub.check(); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrInvalidSubscription, sub.Name, err)
			}
		}
		snd := newSender(sub, cfg.Timeout)
		if err := ensureConsumer(ctx, js, cfg, sub.Name); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting: nothing was delivered
			}
			return err
		}
		runs = append(runs, runConfig(cfg, sub, snd))
		if strings.HasPrefix(sub.URL, "http:") {
			cfg.Log.Warn("webhook endpoint is plain HTTP: deliveries are signed but readable on the way; use https", "subscription", sub.Name, "endpoint", redactURL(sub.URL))
		}
		cfg.Log.Info("webhook subscription ready", "subscription", sub.Name, "endpoint", redactURL(sub.URL),
			"types", sub.Types, "states", sub.States, "resource_prefix", sub.ResourcePrefix)
	}
	// One runtime per subscription: its own consumer, workers and retries.
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, rc := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = function.Run(ctx, js, rc)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// filters are what a subscription's consumer reads of MAINT_WEBHOOK: every event and notice,
// and its own replays.
func filters(sub string) []string {
	return []string{domain.EventPrefix + "*", domain.NoticePrefix + "*", domain.WebhookReplaySubject(sub, "*")}
}

// ensureConsumer creates the subscription's durable consumer, or brings an existing one's
// settings up to date. Where a new one starts is set once, at creation: later runs keep its
// progress whatever --from-start says.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config, sub string) error {
	want := jetstream.ConsumerConfig{
		Durable:        domain.WebhookConsumer(sub),
		Description:    "webhook function, subscription " + sub,
		FilterSubjects: filters(sub),
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{webhookGroup},
		PinnedTTL:      domain.PinnedTTL(cfg.AckWait),
		MaxAckPending:  cfg.InFlight,
		AckWait:        cfg.AckWait,
		// The function decides when a delivery is given up (after RetryFor), never the server.
		MaxDeliver: -1,
		Replicas:   cfg.Replicas,
	}
	if cfg.FromStart {
		want.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	stream := domain.WebhookStream
	c, err := js.Consumer(ctx, stream, want.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		if _, err := js.CreateConsumer(ctx, stream, want); err != nil {
			return fmt.Errorf("webhook function: create consumer %s/%s: %w", stream, want.Durable, err)
		}
		cfg.Log.Info("webhook consumer created", "subscription", sub, "from_start", want.DeliverPolicy == jetstream.DeliverAllPolicy)
		return nil
	case err != nil:
		return fmt.Errorf("webhook function: consumer %s/%s: %w", stream, want.Durable, err)
	}
	have := c.CachedInfo().Config
	want.DeliverPolicy, want.OptStartSeq, want.OptStartTime = have.DeliverPolicy, have.OptStartSeq, have.OptStartTime
	if have.Replicas != 0 && want.Replicas == 0 {
		want.Replicas = have.Replicas
	}
	if slices.Equal(have.FilterSubjects, want.FilterSubjects) && have.MaxAckPending == want.MaxAckPending && have.AckWait == want.AckWait &&
		have.PinnedTTL == want.PinnedTTL && have.PriorityPolicy == want.PriorityPolicy && have.MaxDeliver == want.MaxDeliver {
		return nil
	}
	if _, err := js.UpdateConsumer(ctx, stream, want); err != nil {
		return fmt.Errorf("webhook function: update consumer %s/%s: %w", stream, want.Durable, err)
	}
	return nil
}

// runConfig is the runtime of one subscription.
func runConfig(cfg Config, sub *Subscription, snd *sender) function.Config {
	log := cfg.Log.With("function", "webhook", "subscription", sub.Name)
	return function.Config{
		Name:        "webhook-" + sub.Name,
		Stream:      domain.WebhookStream,
		Consumers:   []string{domain.WebhookConsumer(sub.Name)},
		Handler:     func(ctx context.Context, msg function.Message) error { return deliver(ctx, log, sub, snd, msg) },
		MaxDeliver:  Attempts(cfg.Backoff, cfg.RetryFor),
		Backoff:     cfg.Backoff,
		Concurrency: cfg.Concurrency,
		KeyOf:       func(msg function.Message) string { return domain.KeyFromSubject(msg.Subject) },
		// A dead delivery of this subscription goes to MAINT_DLQ, marked with the subscription,
		// under an id of its own: another subscription may dead-letter the same event.
		DeadLetterSubject: func(msg function.Message) string { return domain.DLQSubject(domain.KeyFromSubject(msg.Subject)) },
		DecorateDeadLetter: func(msg function.Message, out *nats.Msg) {
			// The feed's copy says which stream it was sourced from; a stream refuses a
			// publish that claims to be sourced.
			out.Header.Del(headerStreamSource)
			out.Header.Set(domain.HeaderWebhookSubscription, sub.Name)
			out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("dlq-webhook-%s-%s-%d", sub.Name, msg.Stream, msg.Seq))
		},
		DrainTimeout: cfg.DrainTimeout,
		Logger:       log,
		Meters:       cfg.Meters,
		BalanceEvery: -1, // one consumer per runtime: nothing to spread
	}
}

// deliver handles one message for one subscription: filtered out, it is done; otherwise it is
// posted, and the runtime retries a retryable failure in place or dead-letters a refusal.
func deliver(ctx context.Context, log *slog.Logger, sub *Subscription, snd *sender, msg function.Message) error {
	it := itemOf(msg)
	if !sub.wants(it) {
		return nil
	}
	start := time.Now()
	status, err := snd.send(ctx, it)
	attrs := []any{"key", domain.KeyFromSubject(msg.Subject), "id", it.id, "type", it.ceType, "attempt", msg.Delivered,
		"status", status, "took", time.Since(start).Round(time.Millisecond)}
	switch {
	case err == nil:
		log.Debug("delivered", append(attrs, "outcome", "delivered")...)
	case errors.Is(err, function.ErrPermanent):
		log.Warn("delivery refused; dead-lettering it for this subscription", append(attrs, "outcome", "dead_letter", "err", err)...)
	default:
		log.Info("delivery failed; retrying", append(attrs, "outcome", "retry", "err", err)...)
	}
	return err
}

// headerStreamSource is the header JetStream puts on a sourced message (nats-server's
// JSStreamSource).
const headerStreamSource = "Nats-Stream-Source"
