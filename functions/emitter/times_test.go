package emitter_test

import (
	"fmt"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// timeLines renders the time points of entity id in an export: metric=seconds, in a fixed
// order, for comparison.
func timeLines(e otlpreceiver.Export, id string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range []string{emitter.MetricWindowStart, emitter.MetricWindowEnd, emitter.MetricStateStart} {
		for _, p := range e.Find(m, map[string]string{emitter.AttrResourceID: id}) {
			if p.Unit != "s" || p.Type != otlpreceiver.Gauge || len(p.Attrs) != 1 {
				panic(fmt.Sprintf("%s: unit %q, type %s, attributes %v; want a gauge in s with cloud.resource_id only", m, p.Unit, p.Type, p.Attrs))
			}
			out[m] = p.Value
		}
	}
	return out
}

func fleetValue(t *testing.T, e otlpreceiver.Export, metric string) float64 {
	t.Helper()
	pts := e.Find(metric, nil)
	seen := map[string]bool{}
	var sum float64
	for _, p := range pts {
		sh, ok := p.Attrs[emitter.AttrShard]
		if !ok || len(p.Attrs) != 1 || seen[sh] {
			t.Fatalf("%s: %v, want one point per shard, with only the shard attribute", metric, pts)
		}
		seen[sh] = true
		sum += p.Value
	}
	if len(seen) != shards {
		t.Fatalf("%s: %v, want a point for each of %d shards", metric, pts, shards)
	}
	return sum
}

// stuckAfter is the stuck limit of the emitter of the time tests.
const stuckAfter = 2 * time.Second

// startTimesEmitter runs an emitter with the stuck limit of the time tests, every second, and
// returns its bucket and the receiver of its exports.
func startTimesEmitter(t *testing.T) (*store.Store, *otlpreceiver.Receiver) {
	t.Helper()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	startEmitter(t, env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{StuckAfter: stuckAfter, ExportTimeout: 800 * time.Millisecond}, nil, "a")
	return st, r
}

// TestEmitter_ExportsWindowAndStateTimes follows an entity through an announcement, a new
// announcement that replaces the window, an update that runs past the stuck limit, and None,
// reading the OTLP protobuf of the first run after each change.
func TestEmitter_ExportsWindowAndStateTimes(t *testing.T) {
	t.Parallel()
	st, r := startTimesEmitter(t)

	id := aroID("times", 1)
	sec := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
	day := time.Now().Add(14 * 24 * time.Hour).Truncate(time.Second)
	w1 := &domain.Window{Start: day, End: day.Add(4 * time.Hour)}
	w2 := &domain.Window{Start: day.Add(24 * time.Hour), End: day.Add(26 * time.Hour)}
	since := time.Now().Add(-time.Minute).Truncate(time.Millisecond)

	steps := []struct {
		name           string
		rec            domain.Record
		want           map[string]float64
		overdue, stuck float64
	}{
		{"announced", domain.Record{State: domain.StatePending, Window: w1, StateSince: since},
			map[string]float64{emitter.MetricWindowStart: sec(w1.Start), emitter.MetricWindowEnd: sec(w1.End), emitter.MetricStateStart: sec(since)}, 0, 0},
		{"window replaced", domain.Record{State: domain.StatePending, Window: w2, StateSince: since},
			map[string]float64{emitter.MetricWindowStart: sec(w2.Start), emitter.MetricWindowEnd: sec(w2.End), emitter.MetricStateStart: sec(since)}, 0, 0},
		{"pending past its window", domain.Record{State: domain.StatePending, Window: &domain.Window{Start: since.Add(-time.Hour), End: since}, StateSince: since},
			map[string]float64{emitter.MetricWindowStart: sec(since.Add(-time.Hour)), emitter.MetricWindowEnd: sec(since), emitter.MetricStateStart: sec(since)}, 1, 0},
		{"update running past the stuck limit", domain.Record{State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything, Window: w2, StateSince: since, UpdatedAt: since},
			map[string]float64{emitter.MetricWindowStart: sec(w2.Start), emitter.MetricWindowEnd: sec(w2.End), emitter.MetricStateStart: sec(since)}, 0, 1},
		{"none", domain.Record{State: domain.StateNone, StateSince: since.Add(30 * time.Second)},
			map[string]float64{emitter.MetricStateStart: sec(since.Add(30 * time.Second))}, 0, 0},
	}
	for _, step := range steps {
		rec := step.rec
		rec.ResourceID = id
		put(t, st, rec)
		e := awaitRunAfter(t, r, time.Now(), 5*time.Second)
		got := timeLines(e, id)
		if len(got) != len(step.want) {
			t.Errorf("%s: time points %v, want %v", step.name, got, step.want)
		}
		for m, v := range step.want {
			// Float seconds of a present-day time keep microseconds.
			if d := got[m] - v; d > 1e-5 || d < -1e-5 {
				t.Errorf("%s: %s = %f, want %f", step.name, m, got[m], v)
			}
		}
		if got := fleetValue(t, e, emitter.MetricOverdue); got != step.overdue {
			t.Errorf("%s: overdue = %g, want %g", step.name, got, step.overdue)
		}
		if got := fleetValue(t, e, emitter.MetricStuck); got != step.stuck {
			t.Errorf("%s: stuck = %g, want %g", step.name, got, step.stuck)
		}
	}
}

// TestEmitter_UpdateBecomesStuckAfterTheLimit checks that a running update counts as stuck
// only once it has run longer than the limit.
func TestEmitter_UpdateBecomesStuckAfterTheLimit(t *testing.T) {
	t.Parallel()
	st, r := startTimesEmitter(t)

	started := time.Now()
	put(t, st, domain.Record{ResourceID: aroID("stuck", 1), State: domain.StateUnplanned, Updating: true, Task: domain.TaskCertificatesRenewal, StateSince: started, UpdatedAt: started})
	e := awaitRunAfter(t, r, time.Now(), 5*time.Second)
	if got := fleetValue(t, e, emitter.MetricStuck); got != 0 {
		t.Errorf("stuck = %g %s after the start, want 0", got, runTime(e).Sub(started))
	}
	e = awaitRunAfter(t, r, started.Add(stuckAfter+100*time.Millisecond), 6*time.Second)
	if got := fleetValue(t, e, emitter.MetricStuck); got != 1 {
		t.Errorf("stuck = %g %s after the start, want 1", got, runTime(e).Sub(started))
	}
}

// TestEmitter_CountsConflicts: the entities whose announced window a policy, set after the
// announcement, no longer allows are counted each tick, per shard (summed here), and no longer
// once the policy allows them again; a window announced after the policy is no conflict.
func TestEmitter_CountsConflicts(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	startEmitter(t, env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{ExportTimeout: 800 * time.Millisecond}, nil, "a")
	day := time.Now().UTC().Add(10 * 24 * time.Hour).Truncate(24 * time.Hour)
	w := &domain.Window{Start: day.Add(2 * time.Hour), End: day.Add(6 * time.Hour)}
	announced := time.Now().Add(-time.Hour)
	for i := range 7 {
		put(t, st, domain.Record{ResourceID: aroID("conflicts", i), State: domain.StatePending, Window: w, StateSince: announced, LastCommandAt: announced})
	}
	scope := "/subscriptions/conflicts"
	setPolicy := func(doc string) { testenv.PutPolicy(t, env.JS, scope, doc) }
	if got := fleetValue(t, awaitRunAfter(t, r, time.Now(), 5*time.Second), emitter.MetricConflicts); got != 0 {
		t.Fatalf("conflicts = %g before any policy", got)
	}
	setPolicy(fmt.Sprintf(`"blackouts": [{"start": %q, "end": %q}]`, day.Format(time.DateOnly), day.AddDate(0, 0, 1).Format(time.DateOnly)))
	// One more announced after the blackout: judged by it, no conflict.
	put(t, st, domain.Record{ResourceID: aroID("conflicts", 7), State: domain.StatePending, Window: w, StateSince: time.Now(), LastCommandAt: time.Now().Add(time.Second)})
	if got := fleetValue(t, awaitRunAfter(t, r, time.Now(), 5*time.Second), emitter.MetricConflicts); got != 7 {
		t.Errorf("conflicts = %g under the blackout, want 7", got)
	}
	setPolicy("")
	if got := fleetValue(t, awaitRunAfter(t, r, time.Now(), 5*time.Second), emitter.MetricConflicts); got != 0 {
		t.Errorf("conflicts = %g once the policy is deleted, want 0", got)
	}
}
