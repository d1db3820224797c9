package dashboards_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/telemetry"
	"maintsignals/test/testenv"
)

// The fleet the queries are checked against: one entity in every state, windows inside and
// outside the next 14 days, one Pending past its window, one update in progress (stuck: the
// emitter's stuck limit is tiny here), and a refused command.
const idPrefix = "/subscriptions/0b1f6471-1bf0-4dda-aec3-5d1e7a0c0d05/resourceGroups/rg-dash/providers/Microsoft.RedHatOpenShift/openShiftClusters/"

var (
	idSoon      = idPrefix + "pending-soon"  // Pending, window in 3 days
	idLater     = idPrefix + "pending-later" // Pending, window in 20 days
	idOverdue   = idPrefix + "overdue"       // Pending, window ended an hour ago
	idPlanned   = idPrefix + "planned"       // Planned, updating, window in 1 day
	idUnplanned = idPrefix + "unplanned"     // Unplanned after a failed update
	idCustomer  = idPrefix + "customer"      // CustomerActionNeeded
	idNone      = idPrefix + "none"          // None after a successful update
)

// fleet is what was sent, for the expectations.
type fleet struct {
	now     time.Time
	windows map[string]domain.Window
}

// commands of one round: every entity's commands in order. The second round repeats the
// signal-only commands so that every command counter grows between the two exports.
func roundOne(f fleet) [][]domain.Command {
	w := func(id string) *domain.Window { x := f.windows[id]; return &x }
	return [][]domain.Command{
		{{ResourceID: idSoon, Task: domain.TaskPending, Window: w(idSoon), Reason: "control plane upgrade"}},
		{{ResourceID: idLater, Task: domain.TaskPending, Window: w(idLater)}},
		{{ResourceID: idOverdue, Task: domain.TaskPending, Window: w(idOverdue)}},
		{{ResourceID: idPlanned, Task: domain.TaskPending, Window: w(idPlanned)}, {ResourceID: idPlanned, Task: domain.TaskOperatorUpdate}},
		{{ResourceID: idUnplanned, Task: domain.TaskEverything}, {ResourceID: idUnplanned, Task: domain.TaskUpdateFailed, Error: "timed out"}},
		{{ResourceID: idCustomer, Task: domain.TaskCustomerActionNeeded}},
		{{ResourceID: idNone, Task: domain.TaskCertificatesRenewal}, {ResourceID: idNone, Task: domain.TaskUpdateSucceeded}},
		// Refused: nothing is being updated.
		{{ResourceID: idCustomer, Task: domain.TaskUpdateSucceeded}},
	}
}

func roundTwo(f fleet) [][]domain.Command {
	w := f.windows[idSoon]
	return [][]domain.Command{
		{{ResourceID: idSoon, Task: domain.TaskPending, Window: &w, Reason: "control plane upgrade"}},
		{{ResourceID: idCustomer, Task: domain.TaskCustomerActionNeeded}},
		{{ResourceID: idCustomer, Task: domain.TaskUpdateSucceeded}},
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

// startFleet starts Prometheus and the stack, sends both rounds of commands with an export
// after each, and returns the Prometheus that received them.
func startFleet(t *testing.T) (*testenv.Prometheus, fleet) {
	t.Helper()
	prom := testenv.StartPrometheus(t)
	t.Setenv(telemetry.EnvEndpoint, prom.OTLPEndpoint())
	t.Setenv(telemetry.EnvProtocol, telemetry.ProtocolHTTP)
	t.Setenv(telemetry.EnvMetricsEndpoint, "")
	t.Setenv(telemetry.EnvMetricsExporter, "")
	ctx := testenv.Context(t, 2*time.Minute)
	tel, err := telemetry.Setup(ctx, telemetry.Config{Interval: time.Hour, Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if tel.Mode() != telemetry.ModeOTLPHTTP {
		t.Fatalf("telemetry mode %s, want %s", tel.Mode(), telemetry.ModeOTLPHTTP)
	}
	s := &stack{env: testenv.Start(t), tel: tel}
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- command.Run(fctx, s.env.JS, command.Config{Log: testenv.Quiet(), Meters: tel.MeterProvider()})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("command function: %v", err)
		}
	})
	// Every update in progress counts as stuck.
	if s.em, err = emitter.New(ctx, s.env.JS, tel, emitter.Config{StuckAfter: time.Nanosecond, Logger: testenv.Quiet()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.em.Close() })

	now := time.Now().UTC().Truncate(time.Second)
	f := fleet{now: now, windows: map[string]domain.Window{
		idSoon:    {Start: now.Add(72 * time.Hour), End: now.Add(76 * time.Hour)},
		idLater:   {Start: now.Add(20 * 24 * time.Hour), End: now.Add(20*24*time.Hour + 4*time.Hour)},
		idOverdue: {Start: now.Add(-3 * time.Hour), End: now.Add(-time.Hour)},
		idPlanned: {Start: now.Add(24 * time.Hour), End: now.Add(28 * time.Hour)},
	}}
	for _, round := range [][][]domain.Command{roundOne(f), roundTwo(f)} {
		s.send(t, ctx, round)
		s.export(t, ctx)
	}
	return prom, f
}

// send publishes each entity's commands one after the other (their order matters), waiting
// for each outcome.
func (s *stack) send(t *testing.T, ctx context.Context, round [][]domain.Command) {
	t.Helper()
	seen := map[string]int{}
	for _, cmds := range round {
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
	if _, err := s.em.Emit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}
