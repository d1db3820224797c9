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

	bucket := map[string]string{emitter.AttrStream: "KV_" + domain.Bucket}
	testenv.Eventually(t, 20*time.Second, "the bucket's stream size exported", func() bool {
		subjects := otlpreceiver.Find(r.Points(), emitter.MetricStreamSubjects, bucket)
		deleted := otlpreceiver.Find(r.Points(), emitter.MetricStreamDeleted, bucket)
		msgs := otlpreceiver.Find(r.Points(), emitter.MetricStreamMessages, bucket)
		return len(subjects) > 0 && subjects[len(subjects)-1].Value == 5 &&
			len(deleted) > 0 && deleted[len(deleted)-1].Value == 4 &&
			len(msgs) > 0 && msgs[len(msgs)-1].Value == 5
	})
	// Every stream of the product is reported.
	reported := map[string]bool{}
	for _, p := range otlpreceiver.Find(r.Points(), emitter.MetricStreamSubjects, nil) {
		reported[p.Attrs[emitter.AttrStream]] = true
	}
	for _, s := range []string{domain.CommandsStream, domain.EventsStream, domain.NoticesStream, domain.ScheduleStream, "KV_" + domain.Bucket} {
		if !reported[s] {
			t.Errorf("stream %s not reported (reported: %v)", s, reported)
		}
	}
}
