package emitter_test

import (
	"fmt"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// A run that cannot send its whole shard in time (a slow collector) leaves the rest to the
// next one, which starts where it stopped: over a few runs every entity is sent, none is
// always the one left out, and each run says how much of the shard it covered.
func TestEmit_RunsThatStopShortStartWhereTheLastStopped(t *testing.T) {
	t.Parallel()
	const entities = 200
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	fill(t, env, entities, fleetID)
	// About ten entities a request, two requests at a time, each held 150 ms: a run of 400 ms
	// sends a quarter to a half of the fleet.
	e, err := emitter.New(testenv.Context(t, 5*time.Second), env.JS, newTelemetry(t, r, otlpreceiver.GRPC),
		emitter.Config{BatchSize: 60, ExportTimeout: 400 * time.Millisecond, Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r.SetDelay(150 * time.Millisecond)

	sent := map[string]int{}
	for run := 1; run <= 16 && len(sent) < entities; run++ {
		before := r.Len()
		res, err := e.Emit(testenv.Context(t, 5*time.Second))
		if err == nil {
			t.Fatalf("run %d sent everything in time; the test needs runs that stop short", run)
		}
		if res.Coverage < 0 || res.Coverage >= 1 {
			t.Errorf("run %d: coverage %.2f, want the share it sent, below 1", run, res.Coverage)
		}
		fresh, now := 0, 0
		for _, x := range r.Exports() {
			if x.Seq <= before {
				continue
			}
			for _, p := range x.Find(emitter.MetricStatus, nil) {
				if p.Value == 1 {
					now++
					if sent[p.Attrs[emitter.AttrResourceID]] == 0 {
						fresh++
					}
					sent[p.Attrs[emitter.AttrResourceID]]++
				}
			}
		}
		// A run may send little on a loaded machine; one that sends more than its two first
		// requests (about ten entities each, in flight together) starts where the last stopped,
		// so it sends entities not sent yet.
		if now > 20 && fresh == 0 {
			t.Errorf("run %d sent %d entities, all sent before: it started where another run did", run, now)
		}
		t.Logf("run %d: coverage %.2f, %d entities not sent before", run, res.Coverage, fresh)
	}
	if len(sent) != entities {
		t.Errorf("%d of %d entities sent by the runs that stopped short", len(sent), entities)
	}

	// With the collector quick again, a run sends the whole shard. A loaded machine may still
	// cut a run short at the 400 ms timeout; that one starts the next where it stopped too, so
	// a few runs are allowed before one must cover it all.
	r.SetDelay(0)
	var last string
	for run := 1; ; run++ {
		res, err := e.Emit(testenv.Context(t, 5*time.Second))
		if err == nil && res.Coverage == 1 {
			break
		}
		last = fmt.Sprintf("coverage %.2f, %v", res.Coverage, err)
		if run == 10 {
			t.Fatalf("10 runs with a quick collector, none whole; the last: %s", last)
		}
	}
}
