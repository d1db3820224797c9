// Package subscriptions is the subscriptions function: it applies subscription commands (the
// self-service webhook subscriptions created and deleted on maint.subscription.cmd.<located
// name>) to the subscriptions bucket, exactly once each, and publishes one outcome event per
// command on maint.subscription.evt.<located name>. The webhook function follows the bucket
// and starts or stops the deliveries.
//
// Exactly once, as the policies function does for scopes: the handler decides purely (decide)
// on the located name's last revision, whose header (domain.SubscriptionMeta) is the ledger of
// the commands applied to it, and then commits with a compare-and-swap on the subject's last
// sequence. A create writes its secret first, to the secrets bucket (a compare-and-swap too,
// so that a late copy of a command never overwrites a newer secret), then the record; a delete
// writes the delete, then drops the secret. The outcome event follows under Nats-Msg-Id
// <command id>:<sequence>; a crash before it is healed by the redelivery, which finds its own
// command in the revision and publishes the same event again.
package subscriptions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
	"maintsignals/shared/signing"
)

// Authority checks the signatures of subscription commands (signing.Policy, signing.Watched).
type Authority interface {
	Verify(body []byte, h nats.Header) (*signing.Signer, *domain.Rejection)
	AuthorizeSubscription(s *signing.Signer, scope policy.Scope) *domain.Rejection
	Requires() bool
}

// Publisher publishes outcome events.
type Publisher = function.Publisher

// Config configures a replica. Zero fields take the defaults; a nil Auth accepts unsigned
// subscription commands, and only the NATS permissions confine who sends them.
type Config = function.ApplierConfig[Authority]

// DefaultMaxCommandAge is the command function's.
const DefaultMaxCommandAge = 15 * time.Minute

// concurrency is how many subscriptions one replica handles at once.
const concurrency = 8

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid subscriptions config")

// Applier is one replica of the subscriptions function.
type Applier struct {
	js       jetstream.JetStream
	bucket   jetstream.Stream // the records' stream: a name's last revision, with its header
	secrets  jetstream.Stream // the secrets' stream
	outcomes function.Outcomes[domain.SubscriptionEvent]
	auth     Authority
	maxAge   time.Duration
	log      *slog.Logger
	now      func() time.Time // stamps outcomes; decisions never read it
	commands metric.Int64Counter
	cfg      Config
}

// New prepares a replica on the provisioned streams, buckets and consumer.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Applier, error) {
	cfg, err := cfg.WithDefaults(ErrInvalidConfig, DefaultMaxCommandAge)
	if err != nil {
		return nil, err
	}
	a := &Applier{js: js, auth: cfg.Auth, maxAge: cfg.MaxCommandAge, log: cfg.Log.With("function", "subscriptions"), now: time.Now, cfg: cfg}
	var events jetstream.Stream
	for _, s := range []struct {
		name string
		dst  *jetstream.Stream
	}{{domain.SubscriptionsStream, nil}, {domain.SubscriptionsBucketStream, &a.bucket}, {domain.SubscriptionSecretsStream, &a.secrets}, {domain.SubscriptionEventsStream, &events}} {
		st, err := js.Stream(ctx, s.name)
		if err != nil {
			return nil, fmt.Errorf("subscriptions function: stream %s: %w (run `maintctl provision`)", s.name, err)
		}
		if s.dst != nil {
			*s.dst = st
		}
	}
	a.outcomes = function.NewOutcomes("subscription", events, cmp.Or[Publisher](cfg.Events, js),
		domain.SubscriptionEventSubject, domain.EncodeSubscriptionEvent, domain.DecodeSubscriptionEvent)
	if a.commands, err = cfg.Meters.Meter(scopeName).Int64Counter("cluster.maintenance.subscription.commands",
		metric.WithDescription("Subscription commands handled, by outcome and rejection code."), metric.WithUnit("{command}")); err != nil {
		return nil, fmt.Errorf("subscriptions metrics: %w", err)
	}
	if cfg.Auth == nil || !cfg.Auth.Requires() {
		cfg.Log.Warn("subscription commands are accepted unsigned: only the NATS permissions confine who creates and deletes webhook subscriptions; run with --signers FILE --require-signatures in production")
	}
	return a, nil
}

// scopeName is the instrumentation scope of the function's own metrics.
const scopeName = "maintsignals/functions/subscriptions"

// RuntimeConfig is how the function runtime serves the subscriptions function: its consumer,
// pinned to one replica at a time, names in stream order, dead letters to MAINT_DLQ with a
// dead_lettered outcome.
func (a *Applier) RuntimeConfig() function.Config {
	key := func(msg function.Message) string { return domain.SubscriptionKeyOf(msg.Subject) }
	return function.Config{
		Name:              "subscriptions",
		Stream:            domain.SubscriptionsStream,
		Consumers:         []string{domain.SubscriptionsConsumer},
		Handler:           a.Handle,
		MaxDeliver:        a.cfg.MaxDeliver,
		DeadLetterSubject: func(msg function.Message) string { return domain.SubscriptionDLQSubject(key(msg)) },
		OnDeadLetter:      a.deadLetter,
		Logger:            a.cfg.Log,
		Meters:            a.cfg.Meters,
		Concurrency:       concurrency,
		KeyOf:             key,
	}
}

// Run serves subscription commands until ctx is cancelled, then drains. Any number of
// replicas may run: the consumer is pinned to one at a time.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	a, err := New(ctx, js, cfg)
	if err != nil {
		return function.Starting(ctx, err)
	}
	return function.Run(ctx, js, a.RuntimeConfig())
}
