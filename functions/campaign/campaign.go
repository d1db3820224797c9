// Package campaign is the campaign function (infra/docs/campaigns.md): it applies campaign
// commands (create, pause, resume, cancel, retry, approve), plans a created campaign's
// entities, and on every tick, and at once after a command, makes a pass over each campaign:
// it observes the outcome events of its entities' commands, steps every entity (announcing
// the windows that came due, withdrawing, re-planning), publishes the commands that decides,
// many in flight at once, writes the entities, counts their phases and moves the campaign on
// (waves, thresholds, progress, completion). It exports the burndown every tick.
//
// The rules are shared/campaign's; this package reads, publishes and writes around them:
//   - Entities: publish first, then write. Commands have deterministic ids, so a pass cut
//     short between the two sends the same commands again and the commands stream drops the
//     copies; a copy published after the stream's duplicate window is a duplicate for the
//     command function (it remembers the ids it applied, and a campaign's Pending of the
//     generation the entity holds changes nothing). Entities are written with a
//     compare-and-swap on their revision: a pass that loses a race reads the entity again on
//     the next one.
//   - Outcome events: each campaign remembers how far it read each cell's events stream (Read), and
//     each entity the last event it observed (EventSeq). A pass reads the events stored since,
//     before it steps anything, so a restart observes what its last pass published.
//   - Campaign events (its commands' outcomes and its lifecycle) go out through the
//     campaign's outbox: written with the state they describe, then published, then cleared.
//     Every message on maint.campaign.evt.<id> of an existing campaign is published so, in
//     order, with the last subject sequence expected: the subject's last message tells how
//     far a flush cut short got, so each is published once, however long the function was
//     down.
//   - Replicas: a tick is served by one replica at a time, and so is a campaign command; a
//     pass of one replica may meet the pass another makes after a command, which the
//     compare-and-swaps and the ids keep harmless.
package campaign

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
)

// Function is one replica of the campaign function.
type Function struct {
	cfg     Config
	js      jetstream.JetStream
	log     *slog.Logger
	store   *campaignstore.Store
	records *store.Store
	events  jetstream.Stream
	health  *health
	// policies are compiled once per revision.
	policies campaignstore.PolicyCache

	// mu makes this replica's passes one at a time.
	mu    sync.Mutex
	kicks chan string

	hooks hooks
}

// hooks let tests stop a pass where a crash matters.
type hooks struct {
	// beforePublish runs after a pass decided its commands and before it publishes them;
	// afterPublish after they are published and before the entities are written.
	beforePublish, afterPublish func(campaign string, commands int) error
}

// New prepares a replica on the provisioned streams and buckets.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Function, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cs, err := campaignstore.Open(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("campaign function: %w", err)
	}
	records, err := store.Open(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("campaign function: %w", err)
	}
	events, err := js.Stream(ctx, domain.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("campaign function: stream %s: %w (run `maintctl provision`)", domain.EventsStream, err)
	}
	h, err := newHealth(cfg.Meters.Meter(scopeName))
	if err != nil {
		return nil, err
	}
	if cfg.Auth == nil || !cfg.Auth.Requires() {
		cfg.Logger.Warn("campaign commands are accepted unsigned: run with --signers FILE --require-signatures in production")
	}
	return &Function{cfg: cfg, js: js, log: cfg.Logger.With("function", "campaign"), store: cs, records: records,
		events: events, health: h, kicks: make(chan string, 64)}, nil
}

// RuntimeConfigs are how the function runtime serves the function: the campaign commands, one
// at a time, and the ticks.
func (f *Function) RuntimeConfigs() []function.Config {
	return []function.Config{
		{
			Name: "campaign", Stream: domain.CampaignsStream, Consumers: []string{domain.CampaignConsumer},
			Handler: f.HandleCommand, OnDeadLetter: f.deadLetter, Concurrency: 1,
			DrainTimeout: DrainTimeout, Logger: f.cfg.Logger, Meters: f.cfg.Meters,
		},
		// The tick consumer is pinned to one replica at a time: the replica that holds it
		// makes the passes.
		function.Ticks("campaign-tick", []string{domain.CampaignConsumer}, f.HandleTick, DrainTimeout, f.cfg.Logger, f.cfg.Meters),
	}
}

// DrainTimeout bounds how long a pass may go on after shutdown starts.
const DrainTimeout = time.Minute

// Run serves campaign commands and ticks until ctx is cancelled, then drains.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	f, err := New(ctx, js, cfg)
	if err != nil {
		return function.Starting(ctx, err)
	}
	defer f.health.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, rc := range f.RuntimeConfigs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = function.Run(ctx, js, rc); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); f.ServeKicks(ctx) }()
	wg.Wait()
	return errors.Join(errs...)
}
