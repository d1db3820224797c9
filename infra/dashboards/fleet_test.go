package dashboards_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/telemetry"
	"maintsignals/test/testenv"
)

// The fleet the queries are checked against, sent in two batches with an export after each
// (a rate needs two samples; the second batch repeats every kind of command of the first, so
// every counter grows between them). Each batch has one entity in every state, windows
// inside and outside the next 14 days, one Pending past its window, one update in progress
// (stuck: the emitter's stuck limit is tiny here), and a refused command.
const idPrefix = "/subscriptions/0b1f6471-1bf0-4dda-aec3-5d1e7a0c0d05/resourceGroups/rg-dash/providers/Microsoft.RedHatOpenShift/openShiftClusters/"

// Kinds of entity in a batch; an entity's ID is idPrefix + kind + "-" + batch.
const (
	kindSoon      = "pending-soon"  // Pending, window in 3 days
	kindLater     = "pending-later" // Pending, window in 20 days
	kindOverdue   = "overdue"       // Pending, window ended an hour ago
	kindPlanned   = "planned"       // Planned, updating, window in 1 day
	kindUnplanned = "unplanned"     // Unplanned after a failed update
	kindCustomer  = "customer"      // CustomerActionNeeded
	kindNone      = "none"          // None after a successful update
)

var (
	kinds   = []string{kindSoon, kindLater, kindOverdue, kindPlanned, kindUnplanned, kindCustomer, kindNone}
	batches = []string{"a", "b"}
)

func id(kind, batch string) string { return idPrefix + kind + "-" + batch }

// fleet is what was sent, for the expectations.
type fleet struct {
	start   time.Time
	windows map[string]domain.Window // by kind, the same in every batch
	// streams are the streams of the product that the stack provisioned (the emitter reports
	// the size of each).
	streams []string
}

func newFleet(now time.Time) fleet {
	now = now.UTC().Truncate(time.Second)
	return fleet{start: now, windows: map[string]domain.Window{
		kindSoon:    {Start: now.Add(72 * time.Hour), End: now.Add(76 * time.Hour)},
		kindLater:   {Start: now.Add(20 * 24 * time.Hour), End: now.Add(20*24*time.Hour + 4*time.Hour)},
		kindOverdue: {Start: now.Add(-3 * time.Hour), End: now.Add(-time.Hour)},
		kindPlanned: {Start: now.Add(24 * time.Hour), End: now.Add(28 * time.Hour)},
	}}
}

// batch is the commands of one batch, per entity in order.
func (f fleet) batch(b string) [][]domain.Command {
	w := func(kind string) *domain.Window { x := f.windows[kind]; return &x }
	c := func(kind string, task domain.Task) domain.Command {
		return domain.Command{ResourceID: id(kind, b), Task: task}
	}
	pending := func(kind string) domain.Command {
		cmd := c(kind, domain.TaskPending)
		cmd.Window, cmd.Reason = w(kind), "control plane upgrade"
		return cmd
	}
	failed := c(kindUnplanned, domain.TaskUpdateFailed)
	failed.Error = "timed out"
	return [][]domain.Command{
		{pending(kindSoon)},
		{pending(kindLater)},
		{pending(kindOverdue)},
		{pending(kindPlanned), c(kindPlanned, domain.TaskOperatorUpdate)},
		{c(kindUnplanned, domain.TaskEverything), failed},
		// The second command is refused: nothing is being updated.
		{c(kindCustomer, domain.TaskCustomerActionNeeded), c(kindCustomer, domain.TaskUpdateSucceeded)},
		{c(kindNone, domain.TaskCertificatesRenewal), c(kindNone, domain.TaskUpdateSucceeded)},
	}
}

// stack is the real thing between the commands and Prometheus: an embedded NATS, provisioned,
// the command function and the emitter, exporting over OTLP http/protobuf to Prometheus 3.
type stack struct {
	env  *testenv.Env
	tel  *telemetry.Telemetry
	em   *emitter.Emitter
	sent int
}

// startFleet starts Prometheus and the stack, sends both batches of commands with an export
// after each, and returns the Prometheus that received them.
func startFleet(t *testing.T) (*testenv.Prometheus, fleet) {
	t.Helper()
	prom, tel := startTelemetry(t)
	ctx := testenv.Context(t, 2*time.Minute)
	s := &stack{env: testenv.Start(t), tel: tel}
	serveCommands(t, s.env, tel)
	// Every update in progress counts as stuck.
	var err error
	if s.em, err = emitter.New(ctx, s.env.JS, tel, emitter.Config{StuckAfter: time.Nanosecond, Logger: testenv.Quiet()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.em.Close() })

	f := newFleet(time.Now())
	for _, b := range batches {
		s.send(t, ctx, f.batch(b))
		s.export(t, ctx)
	}
	for name := range s.env.JS.StreamNames(ctx).Name() {
		if slices.Contains(domain.Streams(), name) {
			f.streams = append(f.streams, name)
		}
	}
	return prom, f
}

// serveCommands runs the command function until the test ends.
func serveCommands(t *testing.T, env *testenv.Env, tel *telemetry.Telemetry) {
	serve(t, "command function", func(ctx context.Context) error {
		return command.Run(ctx, env.JS, command.Config{Log: testenv.Quiet(), Meters: tel.MeterProvider()})
	})
}

// serve runs fn until the test ends, and fails the test if fn returns an error.
func serve(t *testing.T, name string, fn func(context.Context) error) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
}

// send publishes each entity's commands one after the other (their order matters), waiting
// for each outcome.
func (s *stack) send(t *testing.T, ctx context.Context, batch [][]domain.Command) {
	t.Helper()
	seen := map[string]int{}
	for _, cmds := range batch {
		for _, c := range cmds {
			s.sent++
			c.ID = fmt.Sprintf("dash-%d", s.sent)
			key := domain.MustKey(c.ResourceID)
			if _, ok := seen[key]; !ok {
				seen[key] = len(testenv.Events(t, s.env.JS, domain.EventSubject(key)))
			}
			if _, err := s.env.JS.PublishMsg(ctx, testenv.CommandMsg(c)); err != nil {
				t.Fatal(err)
			}
			seen[key]++
			testenv.WaitEvents(t, s.env.JS, key, seen[key], 30*time.Second)
		}
	}
}

// export runs the emitter once and flushes the SDK instruments (the command function's and
// the emitter's own), as one tick and one periodic collection would.
func (s *stack) export(t *testing.T, ctx context.Context) {
	t.Helper()
	// Every shard, as one replica holding them all: the fleet gauges come per shard, and the
	// dashboards sum them.
	shards := make([]domain.Shard, domain.DefaultShards)
	for i := range shards {
		shards[i] = domain.Shard{Index: i, Of: domain.DefaultShards}
	}
	for _, res := range s.em.EmitShards(ctx, shards) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if err := s.tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}
