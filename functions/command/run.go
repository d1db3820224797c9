package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Config configures a replica of the command function.
type Config struct {
	// MaxDeliver is the delivery budget before a command is dead-lettered; it matches
	// provisioning (domain.DefaultMaxDeliver unless set otherwise there).
	MaxDeliver int
	Log        *slog.Logger
	// Meters provides the function's meters (its own metrics under ScopeName, the handler
	// metrics under the runtime's scope); nil: no metrics.
	Meters metric.MeterProvider

	// Auth checks command signatures (nil: unsigned commands are accepted): a *signing.Policy,
	// or a *signing.Watched that follows its signers file.
	Auth Authority
	// MaxCommandAge is how long after issuedAt a signed command is accepted, by the time the
	// stream stored it; zero takes DefaultMaxCommandAge.
	MaxCommandAge time.Duration
	// EntityRate and EntityBurst limit how often one entity's record changes (commands per
	// second by their stored times, and the burst); a command over it is refused without
	// touching the bucket. Zero takes the defaults; a negative rate admits everything.
	EntityRate  float64
	EntityBurst int
	// Concurrency is how many commands of one partition (of different entities) this replica
	// handles at once; zero takes DefaultConcurrency.
	Concurrency int
	// CacheSize bounds the records this replica remembers from its own writes (which save a
	// read when the next command of the entity comes); zero takes DefaultCacheSize, a negative
	// size turns the cache off.
	CacheSize int
	// MinNotice is the notice policy: a Pending whose window starts sooner than this after
	// the command was stored is refused unless forced; 0: no minimum.
	MinNotice time.Duration

	// Records and Events replace the bucket and the event publisher (fault injection in tests).
	Records Records
	Events  Publisher
}

// Default per-entity admission: far above what maintenance of one cluster needs, far below a
// flood.
const (
	DefaultEntityRate  = 20
	DefaultEntityBurst = 200
)

// ScopeName is the instrumentation scope of the command function's own metrics.
const ScopeName = "maintsignals/functions/command"

// DefaultMaxCommandAge bounds how long a captured signed command could be replayed.
const DefaultMaxCommandAge = 15 * time.Minute

// Authority checks command signatures.
type Authority interface {
	Verify(body []byte, h nats.Header) (*signing.Signer, *domain.Rejection)
	Authorize(s *signing.Signer, t domain.Task) *domain.Rejection
	Requires() bool
}

// Defaults of a replica's concurrency and record cache.
const (
	DefaultConcurrency = 16
	DefaultCacheSize   = 16384
)

// Run serves command partitions until ctx is cancelled, then drains. Any number of replicas
// may run at once: each partition is pinned to one of them at a time, which keeps its
// entities' commands in order.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	rc, err := Function(ctx, js, cfg)
	if err != nil {
		return err
	}
	return function.Run(ctx, js, rc)
}

// Function builds the runtime configuration of a command-function replica.
func Function(ctx context.Context, js jetstream.JetStream, cfg Config) (function.Config, error) {
	if cfg.Records == nil {
		st, err := store.Open(ctx, js)
		if err != nil {
			return function.Config{}, err
		}
		cfg.Records = st
	}
	if cfg.Events == nil {
		cfg.Events = js
	}
	if cfg.Meters == nil {
		cfg.Meters = noop.NewMeterProvider()
	}
	m, err := NewMetrics(cfg.Meters.Meter(ScopeName))
	if err != nil {
		return function.Config{}, err
	}
	consumers, err := partitionConsumers(ctx, js)
	if err != nil {
		return function.Config{}, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = domain.DefaultMaxDeliver
	}
	if cfg.EntityRate == 0 {
		cfg.EntityRate = DefaultEntityRate
	}
	if cfg.EntityBurst == 0 {
		cfg.EntityBurst = DefaultEntityBurst
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.MaxCommandAge <= 0 {
		cfg.MaxCommandAge = DefaultMaxCommandAge
	}
	if cfg.Auth == nil || !cfg.Auth.Requires() {
		cfg.Log.Warn("commands are accepted unsigned: anyone who may publish commands can change any signal; run with --signers FILE --require-signatures in production")
	}
	d := Deps{
		Records: cfg.Records, Events: cfg.Events, Metrics: m, Log: cfg.Log.With("function", "command"),
		Auth: cfg.Auth, Answered: lastEvents{js},
		Rules: Rules{Admission: domain.Admission{Rate: cfg.EntityRate, Burst: cfg.EntityBurst}, MaxCommandAge: cfg.MaxCommandAge, MinNotice: cfg.MinNotice},
		Cache: NewCache(cfg.CacheSize),
	}
	return function.Config{
		Name:              "command",
		Stream:            domain.CommandsStream,
		Consumers:         consumers,
		Handler:           func(ctx context.Context, msg function.Message) error { return Handle(ctx, d, msg) },
		MaxDeliver:        cfg.MaxDeliver,
		DeadLetterSubject: func(msg function.Message) string { return domain.DLQSubject(domain.KeyFromSubject(msg.Subject)) },
		OnDeadLetter: func(ctx context.Context, msg function.Message, reason string) error {
			return DeadLetter(ctx, d, msg, reason)
		},
		Logger:      cfg.Log,
		Meters:      cfg.Meters,
		Concurrency: cfg.Concurrency,
		KeyOf:       func(msg function.Message) string { return domain.KeyFromSubject(msg.Subject) },
	}, nil
}

// partitionConsumers finds the partition consumers that provisioning created, so that a
// replica always serves every partition whatever the partition count.
func partitionConsumers(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	s, err := js.Stream(ctx, domain.CommandsStream)
	if err != nil {
		return nil, fmt.Errorf("command function: stream %s: %w (run `maintctl provision`)", domain.CommandsStream, err)
	}
	var names []string
	lister := s.ConsumerNames(ctx)
	for n := range lister.Name() {
		if strings.HasPrefix(n, domain.CommandConsumerPrefix) {
			names = append(names, n)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("command function: list consumers: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("command function: no %s* consumers on %s (run `maintctl provision`)", domain.CommandConsumerPrefix, domain.CommandsStream)
	}
	sort.Strings(names)
	return names, nil
}

// lastEvents reads the last outcome event of an entity from the events stream.
type lastEvents struct{ js jetstream.JetStream }

func (l lastEvents) LastEvent(ctx context.Context, key string) (domain.Event, bool, error) {
	s, err := l.js.Stream(ctx, domain.EventsStream)
	if err != nil {
		return domain.Event{}, false, err
	}
	m, err := s.GetLastMsgForSubject(ctx, domain.EventSubject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return domain.Event{}, false, nil
	}
	if err != nil {
		return domain.Event{}, false, err
	}
	ev, err := domain.DecodeEvent(m.Data)
	return ev, err == nil, err
}
