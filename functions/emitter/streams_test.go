package emitter_test

import (
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// TestEmitter_ReportsTheStreamsSize: the emitter's self-metrics carry, per stream of the product,
// its subjects, interior deletes and messages, as the server counts them: a record overwritten
// behind one never touched leaves an interior delete in the bucket's stream.
func TestEmitter_ReportsTheStreamsSize(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	r := otlpreceiver.Start(t)
	tel := newTelemetry(t, r, otlpreceiver.GRPC)
	st := openStore(t, env.JS)
	for i := range 5 {
		put(t, st, domain.Record{ResourceID: aroID("s9", i), State: domain.StatePending, StateSince: time.Now()})
	}
	// The last two, twice more each: four overwritten values behind the first three records.
	for range 2 {
		for i := 3; i < 5; i++ {
			put(t, st, domain.Record{ResourceID: aroID("s9", i), State: domain.StatePlanned, StateSince: time.Now()})
		}
	}
	startEmitter(t, env.JS, tel, emitter.Config{}, nil, "a")

	// The records are spread over the cells' buckets: their sizes add up.
	total := func(metric string) (float64, bool) {
		sum := 0.0
		for _, c := range domain.AllCells() {
			ps := otlpreceiver.Find(r.Points(), metric, map[string]string{emitter.AttrStream: c.RecordsStream()})
			if len(ps) == 0 {
				return 0, false
			}
			sum += ps[len(ps)-1].Value
		}
		return sum, true
	}
	testenv.Eventually(t, 20*time.Second, "the buckets' stream sizes exported", func() bool {
		subjects, ok1 := total(emitter.MetricStreamSubjects)
		deleted, ok2 := total(emitter.MetricStreamDeleted)
		msgs, ok3 := total(emitter.MetricStreamMessages)
		return ok1 && ok2 && ok3 && subjects == 5 && deleted == 4 && msgs == 5
	})
	// Every stream of the product is reported.
	reported := map[string]bool{}
	for _, p := range otlpreceiver.Find(r.Points(), emitter.MetricStreamSubjects, nil) {
		reported[p.Attrs[emitter.AttrStream]] = true
	}
	for _, s := range []string{domain.CommandsStream, domain.EventsStream, domain.Cell(0).EventsStream(), domain.Cell(0).NoticesStream(), domain.ScheduleStream, domain.Cell(0).RecordsStream()} {
		if !reported[s] {
			t.Errorf("stream %s not reported (reported: %v)", s, reported)
		}
	}
}
