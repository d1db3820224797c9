// Package webhook is the webhook function (README, Integrating): it delivers outcome events and notices to
// integrators' endpoints as CloudEvents over HTTP(S), signed per Standard Webhooks 1.0, in
// event order per subscription and entity, at least once.
//
// Each subscription has a durable consumer of its own (webhook-<name>, on MAINT_WEBHOOK, which
// sources the events and notices and takes the subscription's replays), with workers of its
// own in the runtime: a slow or failing endpoint holds up only its subscription. The consumers are keyed by entity and pinned to one replica at a time,
// so an entity's deliveries go one after another in stream order while different entities'
// go at once, and a retry waits in place without holding up other entities. A new
// subscription starts at the events stored after it was created (start.go), or with
// FromStart at the oldest the feed keeps.
package webhook

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// Defaults of a replica.
const (
	DefaultTimeout  = 15 * time.Second
	DefaultRetryFor = 25 * time.Hour // README, Integrating: at least 24 h
	DefaultInFlight = 1000           // messages out per consumer (MaxAckPending)
	// DefaultConcurrency is how many entities of one subscription are delivered at once.
	DefaultConcurrency = 32
	// ackWait of the consumers: how soon a replica that died gives its deliveries back.
	ackWait      = 10 * time.Second
	webhookGroup = "webhook"
)

// DefaultBackoff doubles from 1 s to 5 min; the last value repeats until RetryFor is spent.
var DefaultBackoff = []time.Duration{
	time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
	64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute,
}

// ErrInvalidConfig is wrapped by configuration errors (a subscription's own errors wrap
// ErrInvalidSubscription).
var ErrInvalidConfig = errors.New("invalid webhook config")

// Config configures a replica of the webhook function. Zero fields take the defaults.
type Config struct {
	// Subscriptions are the operator's, from the --subscriptions file.
	Subscriptions []Subscription
	// SelfService follows the subscriptions bucket and delivers to the subscriptions created
	// there with `maintctl subscription create` (README, Tenants): each starts within seconds
	// of its creation, at the events stored after the create command, and stops within
	// seconds of its delete, without a restart.
	SelfService bool
	// AllowPrivateEndpoints lets self-service subscriptions reach loopback, private,
	// link-local and shared addresses; by default a connection to one is refused (and the
	// delivery dead-lettered), so that a customer cannot make the function post into the
	// deployment's own network. The operator's subscriptions are never restricted.
	AllowPrivateEndpoints bool
	// Roots are the authorities self-service endpoints are verified against (nil: the system
	// roots, which SSL_CERT_FILE extends).
	Roots *x509.CertPool
	// FromStart makes a subscription seen for the first time start at the oldest message the
	// feed keeps (the feed copies from its own creation on) instead of at what is stored after
	// the subscription is created. A subscription that has progress keeps it.
	FromStart bool
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration
	// Backoff is the delay before each retry (the last repeats) and RetryFor how long a
	// delivery is retried before it is dead-lettered.
	Backoff  []time.Duration
	RetryFor time.Duration
	// InFlight is how many messages of one consumer may be out (held in order behind their
	// entity's head).
	InFlight int
	// DrainTimeout bounds how long a stopping replica keeps delivering what it holds (default:
	// Timeout + 5 s, so that an attempt under way can finish); what is left goes back to the
	// server and to the next replica, in order.
	DrainTimeout time.Duration
	Log          *slog.Logger
	Meters       metric.MeterProvider
}

// withDefaults fills zero fields and validates the result, each subscription included (on a
// copy, never the caller's).
func (c Config) withDefaults() (Config, error) {
	if len(c.Subscriptions) == 0 && !c.SelfService {
		return c, fmt.Errorf("%w: Subscriptions: none and no self-service subscriptions (give --subscriptions FILE, or keep --self-service)", ErrInvalidConfig)
	}
	if err := cmp.Or(
		function.NotNegative(ErrInvalidConfig, "Timeout", c.Timeout),
		function.NotNegative(ErrInvalidConfig, "RetryFor", c.RetryFor),
		function.NotNegative(ErrInvalidConfig, "InFlight", c.InFlight),
		function.NotNegative(ErrInvalidConfig, "DrainTimeout", c.DrainTimeout),
	); err != nil {
		return c, err
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.RetryFor = cmp.Or(c.RetryFor, DefaultRetryFor)
	c.InFlight = cmp.Or(c.InFlight, DefaultInFlight)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, c.Timeout+5*time.Second)
	c.Log = cmp.Or(c.Log, slog.Default())
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff
	}
	c.Subscriptions = slices.Clone(c.Subscriptions)
	for i := range c.Subscriptions {
		sub := &c.Subscriptions[i]
		if sub.key == nil { // built in code rather than read from a file
			if err := sub.check(); err != nil {
				return c, fmt.Errorf("%w: %s: %w", ErrInvalidSubscription, sub.Name, err)
			}
		}
	}
	return c, nil
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

// Deliverer is one replica of the webhook function: a consumer per subscription, served by
// one runtime in which each consumer has workers of its own, so that a slow or failing
// endpoint holds up only its subscription.
type Deliverer struct {
	cfg Config
	// subs are the subscriptions by the name of their consumer.
	subs map[string]*subscriber
}

// subscriber is one subscription with its HTTP sender, its log and where it started.
type subscriber struct {
	sub   *Subscription
	snd   *sender
	log   *slog.Logger
	start start
	// gone, for a self-service subscription, ends when it is deleted: what it holds is then
	// settled without being sent, and an attempt under way is cut short.
	gone context.Context
}

// New checks the subscriptions and ensures each one's consumer.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Deliverer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	feed, err := js.Stream(ctx, domain.WebhookStream)
	if err != nil {
		return nil, fmt.Errorf("webhook function: the webhook feed, stream %s: %w (run `maintctl provision --webhooks`)", domain.WebhookStream, err)
	}
	d := &Deliverer{cfg: cfg, subs: map[string]*subscriber{}}
	for i := range cfg.Subscriptions {
		sub := &cfg.Subscriptions[i]
		st, err := ensureConsumer(ctx, js, feed, cfg, sub.Name)
		if err != nil {
			return nil, err
		}
		d.subs[domain.WebhookConsumer(sub.Name)] = &subscriber{
			sub: sub, snd: newSender(sub, cfg.Timeout), start: st,
			log: cfg.Log.With("function", "webhook", "subscription", sub.Name),
		}
		if strings.HasPrefix(sub.URL, "http:") {
			cfg.Log.Warn("webhook endpoint is plain HTTP: deliveries are signed but readable on the way; use https", "subscription", sub.Name, "endpoint", redactURL(sub.URL))
		}
		cfg.Log.Info("webhook subscription ready", "subscription", sub.Name, "endpoint", redactURL(sub.URL),
			"types", sub.Types, "states", sub.States, "resource_prefix", sub.ResourcePrefix)
	}
	return d, nil
}

// Run ensures each subscription's consumer and delivers until ctx ends, then drains: the
// operator's subscriptions in one runtime, and, with SelfService, each self-service
// subscription in one of its own while it exists.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	d, err := New(ctx, js, cfg)
	if err != nil {
		return function.Starting(ctx, err)
	}
	var self *selfService
	if d.cfg.SelfService {
		if self, err = newSelfService(ctx, js, d.cfg); err != nil {
			return function.Starting(ctx, err)
		}
	}
	switch {
	case self == nil:
		return function.Run(ctx, js, d.RuntimeConfig())
	case len(d.subs) == 0:
		return self.run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- function.Run(ctx, js, d.RuntimeConfig()) }()
	go func() { errs <- self.run(ctx) }()
	first := <-errs
	cancel() // one ended: the other stops too
	return errors.Join(first, <-errs)
}

// filters are what a subscription's consumer reads of MAINT_WEBHOOK: every event (of the
// entities and of the campaigns) and notice, and its own replays.
func filters(sub string) []string {
	return []string{domain.AllEventsFilter, domain.CampaignEventPrefix + "*", domain.AllNoticesFilter, domain.WebhookReplaySubject(sub, "*")}
}

// consumerConfig is the settings of a subscription's consumer, but where it starts.
func consumerConfig(cfg Config, sub string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        domain.WebhookConsumer(sub),
		Description:    "webhook function, subscription " + sub,
		FilterSubjects: filters(sub),
		AckPolicy:      jetstream.AckExplicitPolicy,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{webhookGroup},
		PinnedTTL:      domain.PinnedTTL(ackWait),
		MaxAckPending:  cfg.InFlight,
		AckWait:        ackWait,
		// The function decides when a delivery is given up (after RetryFor), never the server.
		MaxDeliver: -1,
	}
}

// ensureConsumer creates the subscription's durable consumer, or brings an existing one's
// settings up to date, and returns where the subscription started. Where a new one starts is
// set once, at creation: later runs keep its progress whatever --from-start says.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, feed jetstream.Stream, cfg Config, sub string) (start, error) {
	want := consumerConfig(cfg, sub)
	stream := domain.WebhookStream
	c, err := js.Consumer(ctx, stream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		c, err = createConsumer(ctx, js, feed, cfg, sub)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook function: consumer %s/%s: %w", stream, want.Durable, err)
	}
	have := c.CachedInfo().Config
	want.DeliverPolicy, want.OptStartSeq, want.OptStartTime = have.DeliverPolicy, have.OptStartSeq, have.OptStartTime
	want.Replicas, want.Metadata = have.Replicas, have.Metadata
	if slices.Equal(have.FilterSubjects, want.FilterSubjects) && have.MaxAckPending == want.MaxAckPending && have.AckWait == want.AckWait &&
		have.PinnedTTL == want.PinnedTTL && have.PriorityPolicy == want.PriorityPolicy && have.MaxDeliver == want.MaxDeliver {
		return startOf(have.Metadata), nil
	}
	if _, err := js.UpdateConsumer(ctx, stream, want); err != nil {
		return nil, fmt.Errorf("webhook function: update consumer %s/%s: %w", stream, want.Durable, err)
	}
	return startOf(have.Metadata), nil
}

// createConsumer creates a subscription's consumer: at the oldest the feed keeps with
// FromStart, else at what is stored from now on (see start). Another replica creating it at
// the same moment wins; this one takes its consumer.
func createConsumer(ctx context.Context, js jetstream.JetStream, feed jetstream.Stream, cfg Config, sub string) (jetstream.Consumer, error) {
	want := consumerConfig(cfg, sub)
	want.DeliverPolicy = jetstream.DeliverAllPolicy
	var st start
	if !cfg.FromStart {
		first, s, err := subscriptionStart(ctx, js, feed)
		if err != nil {
			return nil, err
		}
		want.DeliverPolicy, want.OptStartSeq, want.Metadata, st = jetstream.DeliverByStartSequencePolicy, first, s.metadata(), s
	}
	c, err := js.CreateConsumer(ctx, domain.WebhookStream, want)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		return js.Consumer(ctx, domain.WebhookStream, want.Durable)
	}
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	cfg.Log.Info("webhook consumer created", "subscription", sub, "from_start", cfg.FromStart,
		"feed_seq", want.OptStartSeq, "after", st)
	return c, nil
}

// RuntimeConfig is how the function runtime serves the webhook function: every
// subscription's consumer, keyed by entity, retried in place with backoff for RetryFor, then
// dead-lettered for that subscription.
func (d *Deliverer) RuntimeConfig() function.Config {
	consumers := make([]string, 0, len(d.subs))
	for name := range d.subs {
		consumers = append(consumers, name)
	}
	slices.Sort(consumers)
	return runtimeConfig(d.cfg, "webhook", consumers, d.Handle, func(consumer string) string { return d.subs[consumer].sub.Name })
}

// runtimeConfig is the runtime's configuration of the consumers of the subscriptions that
// handler serves, whose names subscription tells by consumer.
func runtimeConfig(cfg Config, name string, consumers []string, handler function.Handler, subscription func(consumer string) string) function.Config {
	return function.Config{
		Name:        name,
		Stream:      domain.WebhookStream,
		Consumers:   consumers,
		Handler:     handler,
		MaxDeliver:  Attempts(cfg.Backoff, cfg.RetryFor),
		Backoff:     cfg.Backoff,
		Concurrency: DefaultConcurrency,
		KeyOf:       func(msg function.Message) string { return domain.KeyFromSubject(msg.Subject) },
		// A dead delivery of a subscription goes to MAINT_DLQ, marked with the subscription,
		// under an id of its own: another subscription may dead-letter the same event.
		DeadLetterSubject: func(msg function.Message) string { return domain.DLQSubject(domain.KeyFromSubject(msg.Subject)) },
		DecorateDeadLetter: func(msg function.Message, out *nats.Msg) {
			name := subscription(msg.Consumer)
			// The feed's copy says which stream it was sourced from; a stream refuses a
			// publish that claims to be sourced.
			out.Header.Del(headerStreamSource)
			out.Header.Set(domain.HeaderWebhookSubscription, name)
			out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("dlq-webhook-%s-%s-%d", name, msg.Stream, msg.Seq))
		},
		DrainTimeout: cfg.DrainTimeout,
		Logger:       cfg.Log,
		Meters:       cfg.Meters,
		// A subscription's consumer stays with the replica it is pinned to.
		BalanceEvery: -1,
	}
}

// Handle delivers one message to the subscription whose consumer it came on (deliver).
func (d *Deliverer) Handle(ctx context.Context, msg function.Message) error {
	s, ok := d.subs[msg.Consumer]
	if !ok {
		return function.Permanent(fmt.Errorf("webhook function: no subscription for consumer %q", msg.Consumer))
	}
	return s.deliver(ctx, msg)
}

// deliver delivers one message to the subscription: filtered out (or stored before it began,
// or the subscription deleted), it is done; otherwise it is posted, and the runtime retries a
// retryable failure in place or dead-letters a refusal.
func (s *subscriber) deliver(ctx context.Context, msg function.Message) error {
	if s.start.history(msg.Header) {
		return nil // stored before the subscription began
	}
	it := itemOf(msg)
	if !s.sub.wants(it) {
		return nil
	}
	if s.gone != nil {
		if s.gone.Err() != nil {
			return nil // deleted: nothing more is sent
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.gone, cancel)()
	}
	start := time.Now()
	status, err := s.snd.send(ctx, it)
	if s.gone != nil && s.gone.Err() != nil {
		return nil // deleted while it was being sent
	}
	attrs := []any{"key", domain.KeyFromSubject(msg.Subject), "id", it.id, "type", it.ceType, "attempt", msg.Delivered,
		"status", status, "took", time.Since(start).Round(time.Millisecond)}
	switch {
	case err == nil:
		s.log.Debug("delivered", append(attrs, "outcome", "delivered")...)
	case errors.Is(err, function.ErrPermanent):
		s.log.Warn("delivery refused; dead-lettering it for this subscription", append(attrs, "outcome", "dead_letter", "err", err)...)
	default:
		s.log.Info("delivery failed; retrying", append(attrs, "outcome", "retry", "err", err)...)
	}
	return err
}

// headerStreamSource is the header JetStream puts on a sourced message (nats-server's
// JSStreamSource).
const headerStreamSource = "Nats-Stream-Source"
