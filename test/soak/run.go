package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// run is the whole soak; it reports whether it passed, or an error that stopped it.
func run(ctx context.Context, o options, log *slog.Logger) (bool, error) {
	t := testenv.NewProgram("soak", log)
	t.Keep = o.keep
	t.OnFatal = func(reason string) { fmt.Println("soak: fail —", firstLine(reason)) }
	defer t.Close()
	cfg, err := buildStack(t, o)
	if err != nil {
		return false, err
	}
	st, js, err := startStack(ctx, t, cfg)
	if err != nil {
		return false, err
	}
	f := newFleet(o.seed, o.churn)
	sub, err := f.follow(js.Conn())
	if err != nil {
		return false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	rate, err := setup(t, js, f, o)
	if err != nil {
		return false, err
	}
	start := time.Now()
	tk := &ticks{r: cfg.receiver, fleet: f, tick: o.tick, from: start}
	smp := newSampler(st, js, cfg.receiver, f, o.tick, o.settle, rate)
	kills := soak(ctx, t, o, js, f, st, tk, smp, rate)
	end := time.Now()
	fmt.Printf("soak: %s of steady load at %.0f commands/s over %d entities and more (churn %.0f %%), tick %s, %d kills; judging from %s\n",
		end.Sub(start).Round(time.Second), rate, o.entities, o.churn*100, o.tick, kills, o.duration/2)
	a := audit(t, js, f)
	from := start.Add(end.Sub(start) / 2)
	var vs []verdict
	for _, s := range smp.all() {
		v := judge(s, from)
		vs = append(vs, v)
		fmt.Println(v.line())
	}
	if o.samples != "" {
		if err := writeSamples(o.samples, smp.all(), start); err != nil {
			return false, err
		}
	}
	cov := tk.result()
	fmt.Println(cov.line())
	fmt.Println(a.line())
	last := summary(vs, cov, a, end.Sub(start), kills)
	fmt.Println(last)
	return strings.HasPrefix(last, "soak: pass"), nil
}

// buildStack builds maintctl and nats-server and starts the OTLP receiver.
func buildStack(t *testenv.Program, o options) (stackConfig, error) {
	cfg := stackConfig{tick: o.tick, forgetAfter: o.forgetAfter, markerTTL: o.markerTTL, plantLeak: o.plantLeak, webhooks: o.webhooks}
	var remove func()
	var err error
	if cfg.maintctl, remove, err = testenv.BuildMaintctl(); err != nil {
		return cfg, err
	}
	t.Cleanup(remove)
	if cfg.natsServer, remove, err = testenv.BuildNatsServer(); err != nil {
		return cfg, err
	}
	t.Cleanup(remove)
	cfg.receiver, err = otlpreceiver.New(otlpreceiver.WithTickCounts(statusMetric, "cloud.resource_id", 64))
	if err != nil {
		return cfg, err
	}
	t.Cleanup(cfg.receiver.Close)
	return cfg, nil
}

// statusMetric is the emitter's per-entity metric, whose points of value 1 count the
// entities a tick exported.
const statusMetric = "cluster.maintenance.status"

// setup makes the fleet, measures the capacity with a burst, and returns the steady rate.
func setup(t *testenv.Program, js jetstream.JetStream, f *fleet, o options) (float64, error) {
	saved := f.churn
	f.churn = 1 // every command makes an entity
	if _, err := f.burst(t, js, o.entities, 3*time.Minute); err != nil {
		return 0, fmt.Errorf("make the fleet: %w", err)
	}
	f.churn = saved
	// Long enough that the stack's steady pace, not the first moments' buffers, decides.
	n := max(10000, 5*o.entities)
	took, err := f.burst(t, js, n, 3*time.Minute)
	if err != nil {
		return 0, fmt.Errorf("measure the capacity: %w", err)
	}
	capacity := float64(n) / took.Seconds()
	rate := o.rate
	if rate == 0 {
		rate = o.share * capacity
	}
	t.Logf("capacity %.0f commands/s (%d commands in %s); steady load %.0f/s", capacity, n, took.Round(time.Millisecond), rate)
	return rate, nil
}

// soak runs the steady load, the kills and the sampling for the duration; it returns the
// number of kills.
func soak(ctx context.Context, t *testenv.Program, o options, js jetstream.JetStream, f *fleet, st *stack, tk *ticks, smp *sampler, rate float64) int {
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.steady(ctx, t, js, rate) }()
	kills := 0
	wg.Add(1)
	go func() { defer wg.Done(); kills = killInTurn(ctx, t, o, st, tk) }()
	every := time.NewTicker(o.tick)
	defer every.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-every.C:
			smp.take(context.WithoutCancel(ctx), now)
			tk.judge(now)
			f.prune(now.Add(-10 * time.Minute))
		}
	}
	wg.Wait()
	return kills
}

// killInTurn kills the next process in turn (the server among the functions) every period,
// halfway between two ticks, until the last few ticks of ctx; it returns the kills.
func killInTurn(ctx context.Context, t *testenv.Program, o options, st *stack, tk *ticks) int {
	order := append([]string{natsRole}, st.functions()...)
	every := o.killEvery
	if every == 0 {
		every = max(20*time.Second, o.duration/time.Duration(len(order)))
	}
	deadline, _ := ctx.Deadline()
	kills := 0
	for next := time.Now().Add(every / 2); ; next = next.Add(every) {
		at := tk.midTick(next)
		if at.After(deadline.Add(-3 * o.tick)) {
			return kills
		}
		select {
		case <-ctx.Done():
			return kills
		case <-time.After(time.Until(at)):
		}
		role := order[kills%len(order)]
		killed := time.Now()
		tk.killed(killed)
		if err := st.kill(role); err != nil {
			t.Errorf("restart %s: %v", role, err)
		}
		t.Logf("SIGKILL %s; serving again %s later", role, time.Since(killed).Round(time.Millisecond))
		kills++
	}
}

// audit checks every command sent against the commands stream, the outcome events and the
// records (testenv.RunAudit).
func audit(t *testenv.Program, js jetstream.JetStream, f *fleet) auditResult {
	sent := f.sentIDs()
	a := testenv.RunAudit(t, js, testenv.AuditInput{
		Ours:  func(id string) bool { return strings.HasPrefix(id, idPrefix) },
		Acked: sent,
		Wait:  3 * time.Minute,
	})
	for _, d := range a.Doubled[:min(len(a.Doubled), 5)] {
		t.Logf("applied twice: %s", d)
	}
	for _, m := range a.Mismatches[:min(len(a.Mismatches), 5)] {
		t.Logf("off the model: %s", m)
	}
	return auditResult{sent: len(sent), stored: a.Stored, applied: a.Applied, rejected: a.Rejected, deadLettered: a.DeadLettered,
		lost: a.Lost, doubled: len(a.Doubled), mismatches: len(a.Mismatches)}
}

// writeSamples writes every sample as CSV: series, seconds since the start, lifetime, value.
func writeSamples(path string, all []*series, start time.Time) error {
	var b strings.Builder
	b.WriteString("series,seconds,lifetime,value\n")
	for _, s := range all {
		for _, x := range s.samples {
			fmt.Fprintf(&b, "%s,%.1f,%d,%g\n", s.name, x.at.Sub(start).Seconds(), x.life, x.v)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	return nil
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
