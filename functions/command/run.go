package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
)

// Applier is one replica of the command function: its dependencies, its handler (Handle) and
// how the runtime serves it (RuntimeConfig).
type Applier struct {
	records Records
	events  Publisher
	metrics *metrics
	log     *slog.Logger
	// now stamps outcomes; decisions never read it.
	now func() time.Time
	// auth checks command signatures; nil accepts every command unsigned.
	auth  Authority
	rules settings
	// idPattern restricts resource IDs (nil: any).
	idPattern *regexp.Regexp
	// answers finds the last outcome event of an entity, so that a redelivered command that
	// already has its outcome is not judged again.
	answers answers
	// cache remembers records this replica wrote; nil reads every record from the bucket.
	cache *cache
	// policies is the replica's view of the policies bucket; deadlines the campaigns' (nil:
	// no deadline).
	policies  policies
	deadlines Deadlines

	// What the runtime needs besides the handler.
	consumers  []string
	maxDeliver int
	runtimeLog *slog.Logger
	meters     metric.MeterProvider
}

// New prepares a replica on the provisioned bucket and streams: it finds the partition
// consumers that provisioning created, so that a replica serves every partition whatever
// their count.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Applier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Records == nil {
		st, err := store.Open(ctx, js)
		if err != nil {
			return nil, err
		}
		st.SetForgetAfter(max(cfg.ForgetAfter, 0))
		cfg.Records = st
	}
	if cfg.Events == nil {
		cfg.Events = js
	}
	m, err := newMetrics(cfg.Meters.Meter(scopeName))
	if err != nil {
		return nil, err
	}
	consumers, err := partitionConsumers(ctx, js)
	if err != nil {
		return nil, err
	}
	for _, name := range domain.EventsStreams() {
		if _, err := js.Stream(ctx, name); err != nil {
			return nil, fmt.Errorf("command function: stream %s: %w (run `maintctl provision`)", name, err)
		}
	}
	view, err := store.OpenPolicies(ctx, js, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("command function: %w", err)
	}
	if cfg.Auth == nil || !cfg.Auth.Requires() {
		cfg.Log.Warn("commands are accepted unsigned: anyone who may publish commands can change any signal; run with --signers FILE --require-signatures in production")
	}
	d := &Applier{
		records: cfg.Records, events: cfg.Events, metrics: m, log: cfg.Log.With("function", "command"),
		now: time.Now, auth: cfg.Auth, answers: lastEvents{js}, idPattern: cfg.ResourceIDPattern,
		rules: settings{Admission: domain.Admission{Rate: cfg.EntityRate, Burst: cfg.EntityBurst}, MaxCommandAge: cfg.MaxCommandAge, MinNotice: cfg.MinNotice},
		cache: newCache(cacheSize), policies: view, deadlines: cfg.Deadlines,

		consumers: consumers, maxDeliver: cfg.MaxDeliver, runtimeLog: cfg.Log, meters: cfg.Meters,
	}
	if d.deadlines == nil {
		d.deadlines = &deadlines{js: js}
	}
	return d, nil
}

// RuntimeConfig is how the function runtime serves the command function: every partition
// consumer, in key order (an entity's commands one at a time, in stream order), dead letters
// to MAINT_DLQ with a dead_lettered outcome.
func (d *Applier) RuntimeConfig() function.Config {
	return function.Config{
		Name:              "command",
		Stream:            domain.CommandsStream,
		Consumers:         d.consumers,
		Handler:           d.Handle,
		MaxDeliver:        d.maxDeliver,
		DeadLetterSubject: func(msg function.Message) string { return domain.DLQSubject(domain.KeyFromSubject(msg.Subject)) },
		OnDeadLetter:      d.deadLetter,
		Logger:            d.runtimeLog,
		Meters:            d.meters,
		Concurrency:       concurrency,
		KeyOf:             func(msg function.Message) string { return domain.KeyFromSubject(msg.Subject) },
	}
}

// Run serves command partitions until ctx is cancelled, then drains. Any number of replicas
// may run at once: each partition is pinned to one of them at a time, which keeps its
// entities' commands in order.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	d, err := New(ctx, js, cfg)
	if err != nil {
		return function.Starting(ctx, err)
	}
	return function.Run(ctx, js, d.RuntimeConfig())
}

// partitionConsumers finds the partition consumers that provisioning created.
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

// lastEvents reads the last outcome event of an entity from its cell's events stream, as
// its leader has it.
type lastEvents struct{ js jetstream.JetStream }

func (l lastEvents) LastEvent(ctx context.Context, key string) (domain.Event, bool, error) {
	m, err := store.LeaderMsg(ctx, l.js, domain.EventStreamOf(key), domain.EventSubject(key))
	if errors.Is(err, store.ErrNoMessage) {
		return domain.Event{}, false, nil
	}
	if err != nil {
		return domain.Event{}, false, err
	}
	ev, err := domain.DecodeEvent(m.Data)
	return ev, err == nil, err
}
