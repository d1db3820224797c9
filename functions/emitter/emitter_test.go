package emitter_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// TestEmitter_ExportsEachEntityStateAtEveryTick walks an entity through Pending → Planned
// (updating) → UpdateFailed (Planned, not updating, lastError) → None → dropped after the
// retention, with the exporter configured from the environment, and checks the exact points
// of the first run after each change and of every run while the entity is in None.
func TestEmitter_ExportsEachEntityStateAtEveryTick(t *testing.T) {
	tests := []struct {
		protocol string
		pucm     bool
	}{
		{protocol: otlpreceiver.GRPC, pucm: true},
		{protocol: otlpreceiver.HTTP, pucm: false},
	}
	for _, tt := range tests {
		t.Run(tt.protocol, func(t *testing.T) {
			const retention = 1500 * time.Millisecond
			env := testenv.Start(t, testenv.WithTick(time.Second))
			r := otlpreceiver.Start(t)
			r.SetEnv(t, tt.protocol)
			t.Setenv("OTEL_SERVICE_NAME", "maint-emitter-test")
			tel := newTelemetryFromEnv(t)
			st := openStore(t, env.JS)

			// Mixed case: the ID is exported as first seen.
			id := "/subscriptions/0B1F/resourceGroups/RG-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
			other := aroID("s2", 7)
			put(t, st, domain.Record{ResourceID: other, State: domain.StateCustomerActionNeeded, StateSince: time.Now()})
			// Long in None: past its retention before the test starts, never emitted, but still an
			// entity in None in the fleet view.
			put(t, st, domain.Record{ResourceID: aroID("s2", 8), State: domain.StateNone, StateSince: time.Now().Add(-48 * time.Hour)})

			startEmitter(t, env.JS, tel, emitter.Config{Retention: retention, PUCM: tt.pucm, ExportTimeout: 800 * time.Millisecond}, nil, "a")

			steps := []struct {
				name  string
				rec   domain.Record
				fleet string
			}{
				{"pending", domain.Record{State: domain.StatePending, Reason: "kernel update"},
					"none=1 pending=1 planned=0 unplanned=0 customer_action_needed=1"},
				{"planned while updating", domain.Record{State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything},
					"none=1 pending=0 planned=1 unplanned=0 customer_action_needed=1"},
				{"update failed keeps planned", domain.Record{State: domain.StatePlanned, Task: domain.TaskEverything, LastError: "upgrade timed out"},
					"none=1 pending=0 planned=1 unplanned=0 customer_action_needed=1"},
				{"none", domain.Record{State: domain.StateNone},
					"none=2 pending=0 planned=0 unplanned=0 customer_action_needed=1"},
			}
			var noneSince time.Time
			for _, step := range steps {
				rec := step.rec
				rec.ResourceID = id
				rec.StateSince = time.Now()
				put(t, st, rec)
				written := time.Now()
				if rec.State == domain.StateNone {
					noneSince = rec.StateSince
				}
				e := awaitRunAfter(t, r, written, 5*time.Second)
				if got, want := entityLines(e, id), wantLines(id, rec.State, tt.pucm); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: points\n%v\nwant\n%v", step.name, got, want)
				}
				if got, want := entityLines(e, other), wantLines(other, domain.StateCustomerActionNeeded, tt.pucm); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: other entity's points\n%v\nwant\n%v", step.name, got, want)
				}
				if got := fleet(e); got != step.fleet {
					t.Errorf("%s: fleet %s, want %s", step.name, got, step.fleet)
				}
				if n := len(e.Find(emitter.MetricStatus, nil)); n != 10 {
					t.Errorf("%s: %d status points, want 10 (two entities; the long-None one never)", step.name, n)
				}
				if res := e.Points()[0].Resource; res["service.name"] != "maint-emitter-test" || res["service.instance.id"] != "" {
					t.Errorf("%s: resource %v, want the fleet resource named from OTEL_SERVICE_NAME", step.name, res)
				}
			}

			// Past the retention the entity drops out; every run before that still carried it.
			last := awaitRunAfter(t, r, noneSince.Add(retention), 5*time.Second)
			if got := entityLines(last, id); len(got) != 0 {
				t.Errorf("entity still emitted %s after None: %v", runTime(last).Sub(noneSince), got)
			}
			if got := fleet(last); got != "none=2 pending=0 planned=0 unplanned=0 customer_action_needed=1" {
				t.Errorf("fleet after drop-out: %s", got)
			}
			for _, e := range ticksOf(r, shards) {
				at := runTime(e)
				if at.Before(noneSince) {
					continue
				}
				want := []string(nil)
				if at.Sub(noneSince) < retention {
					want = wantLines(id, domain.StateNone, tt.pucm)
				}
				if got := entityLines(e, id); !reflect.DeepEqual(got, want) {
					t.Errorf("run %s after None: points %v, want %v", at.Sub(noneSince), got, want)
				}
			}
			for _, e := range r.Exports() {
				if isRun(e) && e.Encoding != "gzip" {
					t.Errorf("emission request #%d not compressed", e.Seq)
				}
			}
		})
	}
}

// Each tick, every tracked entity is exported exactly once across the shards, whether one
// replica holds every shard or several share them; no shard of a tick is served twice.
func TestEmitter_ReplicasShareEachTickEveryEntityOnce(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d replicas", replicas), func(t *testing.T) {
			t.Parallel()
			const entities = 400
			env := testenv.Start(t, testenv.WithTick(time.Second))
			r := otlpreceiver.Start(t)
			fill(t, env, entities, fleetID)
			var tk ticks
			// The export timeout is generous: this test is about sharing, and a loaded machine
			// must not turn slow runs into missing ticks.
			cfg := emitter.Config{ExportTimeout: 3 * time.Second}
			var stops []func()
			for i := range replicas {
				stops = append(stops, startEmitter(t, env.JS, newTelemetry(t, r, otlpreceiver.GRPC), cfg, &tk, fmt.Sprint(i)))
			}
			testenv.Eventually(t, 45*time.Second, "three whole emissions of 1s ticks", func() bool {
				return len(ticksOf(r, shards)) >= 3
			})
			for _, stop := range stops {
				stop()
			}

			type shardTick struct {
				consumer string
				seq      uint64
			}
			byShardTick := map[shardTick]string{}
			perReplica := map[string]map[string]bool{}
			for _, h := range tk.all() {
				// A tick delivered again (a pin that moved while its holder was slow to
				// acknowledge) is skipped, never run a second time.
				k := shardTick{h.consumer, h.seq}
				if prev, dup := byShardTick[k]; dup && h.delivered == 1 {
					t.Errorf("tick %d of %s delivered first to %s and to %s", h.seq, h.consumer, prev, h.replica)
				}
				byShardTick[k] = h.replica
				if perReplica[h.replica] == nil {
					perReplica[h.replica] = map[string]bool{}
				}
				perReplica[h.replica][h.consumer] = true
			}
			// No shard of a tick was sent twice: one fleet view per tick and shard.
			views := map[string]int{}
			for _, x := range r.Exports() {
				for _, p := range x.Find(emitter.MetricOverdue, nil) {
					views[p.Time.String()+"/"+p.Attrs[emitter.AttrShard]]++
				}
			}
			for k, n := range views {
				if n > 1 {
					t.Errorf("shard of tick %s sent %d times", k, n)
				}
			}
			whole := ticksOf(r, shards)
			for _, e := range whole {
				ids := map[string]int{}
				for _, p := range e.Find(emitter.MetricStatus, nil) {
					if p.Value == 1 {
						ids[p.Attrs[emitter.AttrResourceID]]++
					}
				}
				dups := 0
				for _, n := range ids {
					dups += n - 1
				}
				if len(ids) != entities || dups != 0 {
					t.Errorf("tick at %s: %d distinct entities, %d exported twice; want %d once each", runTime(e).Format("15:04:05.000"), len(ids), dups, entities)
				}
				if got := fleet(e); got != "none=80 pending=80 planned=80 unplanned=80 customer_action_needed=80" {
					t.Errorf("tick at %s: fleet summed over the shards %s", runTime(e).Format("15:04:05.000"), got)
				}
			}
			if replicas > 1 && len(perReplica) < 2 {
				t.Errorf("shards served by %d replica(s) of %d: want them shared", len(perReplica), replicas)
			}
			t.Logf("%d whole emissions; shards served per replica: %v", len(whole), perReplica)
		})
	}
}

func TestEmitter_CollectorOutageFailsRunsWithoutDelayingTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		protocol string
		outage   func(*otlpreceiver.Receiver)
		restore  func(*testing.T, *otlpreceiver.Receiver)
	}{
		{
			name: "collector down", protocol: otlpreceiver.GRPC,
			outage: func(r *otlpreceiver.Receiver) { r.Stop() },
			restore: func(t *testing.T, r *otlpreceiver.Receiver) {
				if err := r.Restart(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "collector slow", protocol: otlpreceiver.HTTP,
			outage:  func(r *otlpreceiver.Receiver) { r.SetDelay(5 * time.Second) },
			restore: func(_ *testing.T, r *otlpreceiver.Receiver) { r.SetDelay(0) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const exportTimeout = 600 * time.Millisecond
			env := testenv.Start(t, testenv.WithTick(time.Second))
			r := otlpreceiver.Start(t)
			st := openStore(t, env.JS)
			id := aroID("s3", 1)
			put(t, st, domain.Record{ResourceID: id, State: domain.StateUnplanned, StateSince: time.Now()})
			var tk ticks
			startEmitter(t, env.JS, newTelemetry(t, r, tt.protocol), emitter.Config{ExportTimeout: exportTimeout}, &tk, "a")

			awaitRunAfter(t, r, time.Time{}, 5*time.Second)
			tt.outage(r)
			down := time.Now()
			handledBefore := len(tk.all())
			time.Sleep(3500 * time.Millisecond)
			// Every tick of the outage was handled, each within the export timeout.
			if n := len(tk.all()) - handledBefore; n < 2 { // about three; a busy machine may stall one
				t.Errorf("%d ticks handled during a 3.5s outage, want one per second", n)
			}
			tt.restore(t, r)
			back := time.Now()
			e := awaitRunAfter(t, r, down, 5*time.Second)
			if d := time.Since(back); d > 2500*time.Millisecond {
				t.Errorf("first whole emission %s after the collector came back, want within the next tick", d)
			}
			if got, want := entityLines(e, id), wantLines(id, domain.StateUnplanned, false); !reflect.DeepEqual(got, want) {
				t.Errorf("points after recovery %v, want %v", got, want)
			}

			// The health metrics, exported once the collector is back, count the failed runs;
			// none took longer than the export timeout.
			awaitCounter(t, r, emitter.MetricRuns, emitter.OutcomeFailure, 3, 5*time.Second)
			for _, p := range otlpreceiver.Find(r.Points(), emitter.MetricDuration, map[string]string{emitter.AttrOutcome: emitter.OutcomeFailure}) {
				if p.Count > 0 && p.Sum/float64(p.Count) > (exportTimeout+300*time.Millisecond).Seconds() {
					t.Errorf("failed runs took %.2fs on average, want at most the %s export timeout", p.Sum/float64(p.Count), exportTimeout)
				}
			}
			// The time of the last success moves past the recovery.
			testenv.Eventually(t, 5*time.Second, "last_success after the collector came back", func() bool {
				var lastSuccess float64
				for _, p := range otlpreceiver.Find(r.Points(), emitter.MetricLastSuccess, nil) {
					lastSuccess = max(lastSuccess, p.Value)
				}
				return lastSuccess >= float64(back.UnixNano())/1e9
			})
			t.Logf("outage %s; tick at %s emitted whole after it", back.Sub(down).Round(time.Millisecond), runTime(e).Sub(back).Round(time.Millisecond))
		})
	}
}

func TestEmitter_CoalescesTicksThatPiledUpWhileNoneRan(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	put(t, st, domain.Record{ResourceID: aroID("s4", 1), State: domain.StatePending, StateSince: time.Now()})
	// No emitter for a while: ticks wait on the consumer.
	time.Sleep(3500 * time.Millisecond)

	var tk ticks
	stop := startEmitter(t, env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{ExportTimeout: 800 * time.Millisecond}, &tk, "a")
	awaitRunAfter(t, r, time.Time{}, 5*time.Second)
	stop()

	handled := tk.all()
	if len(handled) < 3 || handled[0].pending < 2 {
		t.Fatalf("handled %+v: want a backlog of at least 3 ticks", handled)
	}
	skipped, runs := 0, 0
	for _, h := range handled {
		if h.pending > 0 {
			skipped++
		} else {
			runs++
		}
	}
	emissions := 0
	for _, e := range r.Exports() {
		if isRun(e) {
			emissions++
		}
	}
	if emissions != runs || runs > skipped {
		t.Errorf("%d ticks handled (%d with newer ones waiting), %d emissions: want one emission for the backlog", len(handled), skipped, emissions)
	}
}

func TestHandle_RunsOnlyForTheNewestTick(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	put(t, st, domain.Record{ResourceID: aroID("s5", 1), State: domain.StatePlanned, StateSince: time.Now()})
	tel := newTelemetry(t, r, otlpreceiver.GRPC)
	e, err := emitter.New(context.Background(), env.JS, tel, emitter.Config{Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	tests := []struct {
		name    string
		pending uint64
		emits   bool
		outcome string
	}{
		{name: "newer ticks waiting: skipped", pending: 3, emits: false, outcome: emitter.OutcomeSkipped},
		{name: "one newer tick waiting: skipped", pending: 1, emits: false, outcome: emitter.OutcomeSkipped},
		{name: "newest tick: emits", pending: 0, emits: true, outcome: emitter.OutcomeSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := r.Len()
			beforeRuns := counter(r, emitter.MetricRuns, tt.outcome)
			if err := e.Handle(testenv.Context(t, 5*time.Second), function.Message{Subject: domain.TickSubject, Pending: tt.pending}); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if err := tel.ForceFlush(testenv.Context(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			emitted := false
			for _, x := range r.Exports() {
				if x.Seq > before && isRun(x) {
					emitted = true
				}
			}
			if emitted != tt.emits {
				t.Errorf("emitted = %v, want %v", emitted, tt.emits)
			}
			if got := counter(r, emitter.MetricRuns, tt.outcome); got != beforeRuns+1 {
				t.Errorf("runs{outcome=%s} %g -> %g, want one more", tt.outcome, beforeRuns, got)
			}
		})
	}
}

func TestHandle_AcksAFailedRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	tel := newTelemetry(t, r, otlpreceiver.HTTP)
	e, err := emitter.New(context.Background(), env.JS, tel, emitter.Config{ExportTimeout: 300 * time.Millisecond, Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r.Stop()
	if _, err := e.Emit(testenv.Context(t, 5*time.Second)); !errors.Is(err, emitter.ErrExport) {
		t.Errorf("Emit to a stopped collector: err = %v, want ErrExport", err)
	}
	// The tick is acknowledged all the same: the next tick is the retry.
	if err := e.Handle(testenv.Context(t, 5*time.Second), function.Message{Subject: domain.TickSubject}); err != nil {
		t.Errorf("Handle returned %v; a failed emission must not redeliver the tick", err)
	}
}

func TestEmit_SkipsRecordsItCannotRead(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	good := aroID("s6", 1)
	put(t, st, domain.Record{ResourceID: good, State: domain.StatePending, StateSince: time.Now()})
	testenv.PutRawRecord(t, env.JS, "not-json", []byte("{oops"))
	testenv.PutRawRecord(t, env.JS, "unknown-state", []byte(`{"resourceId":"/x","state":"Rebooting"}`))
	e, err := emitter.New(context.Background(), env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Emit(testenv.Context(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	if res.Entities != 1 || res.Corrupt != 2 || res.Requests != 1 {
		t.Errorf("result %+v, want 1 entity, 2 corrupt records, 1 request", res)
	}
	x, err := r.Await(testenv.Context(t, 5*time.Second), 0, isRun)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entityLines(x, good), wantLines(good, domain.StatePending, false); !reflect.DeepEqual(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
}

func TestEmit_EmptyBucketSendsAFleetOfZeros(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	e, err := emitter.New(context.Background(), env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Emit(testenv.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	x, err := r.Await(testenv.Context(t, 5*time.Second), 0, isRun)
	if err != nil {
		t.Fatal(err)
	}
	if got := fleet(x); got != "none=0 pending=0 planned=0 unplanned=0 customer_action_needed=0" {
		t.Errorf("fleet %s", got)
	}
	if n := len(x.Find(emitter.MetricStatus, nil)); n != 0 {
		t.Errorf("%d status points from an empty bucket", n)
	}
}
