// Package policies is the policies function: it applies policy commands (customers'
// maintenance policies set and deleted, on maint.policy.<scope key>) to the
// maintenance-policies bucket, exactly once each, and publishes one outcome event per command
// on maint.evt.policy.<scope key>.
//
// Exactly once, as the command function does for records: the handler decides purely (decide)
// on the scope's last revision and then commits. A revision is the policy document alone as its
// value, and a header (domain.PolicyMeta) naming the command that wrote it (id, sequence and
// stored time in MAINT_POLICIES), the ids applied lately, the signed ones within the command
// age, the revision it replaced and when it was applied. The write is a publish to the
// bucket's subject that expects the subject's last sequence to be the revision read (a
// compare-and-swap: a copy of the command racing it loses and reads again); the outcome
// event follows under Nats-Msg-Id <command id>:<sequence>. A crash between the write and the
// event is healed by the redelivery, which finds its own command in the revision and publishes
// the same event again (rebuilt from the revision: the same id, time and revision).
package policies

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
	"maintsignals/shared/signing"
)

// Authority checks the signatures of policy commands (signing.Policy, signing.Watched).
type Authority interface {
	Verify(body []byte, h nats.Header) (*signing.Signer, *domain.Rejection)
	AuthorizePolicy(s *signing.Signer, scope policy.Scope) *domain.Rejection
	Requires() bool
}

// Config configures a replica. Zero fields take the defaults; a nil Auth accepts unsigned
// policy commands.
type Config = function.ApplierConfig[Authority]

// Publisher publishes outcome events.
type Publisher = function.Publisher

// DefaultMaxCommandAge is the command function's.
const DefaultMaxCommandAge = 15 * time.Minute

// concurrency is how many scopes one replica handles at once.
const concurrency = 8

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid policies config")

// Applier is one replica of the policies function.
type Applier struct {
	js       jetstream.JetStream
	bucket   jetstream.Stream // the bucket's stream: the scope's last revision, with its header
	outcomes function.Outcomes[domain.PolicyEvent]
	auth     Authority
	maxAge   time.Duration
	log      *slog.Logger
	now      func() time.Time // stamps outcomes; decisions never read it
	metrics  *metrics
	cfg      Config
}

// New prepares a replica on the provisioned stream, bucket and consumer.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Applier, error) {
	cfg, err := cfg.WithDefaults(ErrInvalidConfig, DefaultMaxCommandAge)
	if err != nil {
		return nil, err
	}
	a := &Applier{js: js, auth: cfg.Auth, maxAge: cfg.MaxCommandAge, log: cfg.Log.With("function", "policies"), now: time.Now, cfg: cfg}
	if _, err := stream(ctx, js, domain.PoliciesStream); err != nil {
		return nil, err
	}
	if a.bucket, err = stream(ctx, js, domain.PoliciesBucketStream); err != nil {
		return nil, err
	}
	events, err := stream(ctx, js, domain.EventsStream)
	if err != nil {
		return nil, err
	}
	a.outcomes = function.NewOutcomes("policy", events, cmp.Or[Publisher](cfg.Events, js), domain.PolicyEventSubject, domain.EncodePolicyEvent, domain.DecodePolicyEvent)
	if a.metrics, err = newMetrics(cfg.Meters.Meter(scopeName)); err != nil {
		return nil, err
	}
	if cfg.Auth == nil || !cfg.Auth.Requires() {
		cfg.Log.Warn("policy commands are accepted unsigned: anyone who may publish them can change any customer's policy; run with --signers FILE --require-signatures in production")
	}
	return a, nil
}

func stream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("policies function: stream %s: %w (run `maintctl provision`)", name, err)
	}
	return s, nil
}

// RuntimeConfig is how the function runtime serves the policies function: its consumer, pinned
// to one replica at a time, scopes in stream order, dead letters to MAINT_DLQ with a
// dead_lettered outcome.
func (a *Applier) RuntimeConfig() function.Config {
	return function.Config{
		Name:              "policies",
		Stream:            domain.PoliciesStream,
		Consumers:         []string{domain.PoliciesConsumer},
		Handler:           a.Handle,
		MaxDeliver:        a.cfg.MaxDeliver,
		DeadLetterSubject: func(msg function.Message) string { return domain.DLQSubject(domain.KeyFromSubject(msg.Subject)) },
		OnDeadLetter:      a.deadLetter,
		Logger:            a.cfg.Log,
		Meters:            a.cfg.Meters,
		Concurrency:       concurrency,
		KeyOf:             func(msg function.Message) string { return domain.KeyFromSubject(msg.Subject) },
	}
}

// Run serves policy commands until ctx is cancelled, then drains. Any number of replicas may
// run: the consumer is pinned to one at a time.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	a, err := New(ctx, js, cfg)
	if err != nil {
		return function.Starting(ctx, err)
	}
	return function.Run(ctx, js, a.RuntimeConfig())
}
