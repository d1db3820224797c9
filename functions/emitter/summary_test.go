package emitter_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/emitter"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// In a region, each shard of a run publishes its part of the region's summary; the parts add
// up to what `maintctl list` counts (forgotten entities out, None past the retention in), and
// a run of the same tick again adds no part (the ids name the region, the shard and the tick).
func TestEmit_InARegionPublishesTheSummaryListCounts(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	now := time.Now().UTC().Truncate(time.Second)
	old := now.Add(-48 * time.Hour)
	recs := []domain.Record{
		{ResourceID: aroID("r1", 1), State: domain.StatePending, StateSince: now},
		{ResourceID: aroID("r1", 2), State: domain.StatePending, StateSince: old, Window: &domain.Window{Start: old, End: old.Add(time.Hour)}},
		{ResourceID: aroID("r1", 3), State: domain.StatePlanned, StateSince: now, Updating: true, Task: domain.TaskEverything},
		{ResourceID: aroID("r1", 4), State: domain.StateUnplanned, StateSince: old, UpdatedAt: old, Updating: true, Task: domain.TaskEverything},
		{ResourceID: aroID("r1", 5), State: domain.StateNone, StateSince: old},
		{ResourceID: aroID("r1", 6), State: domain.StateNone, StateSince: now, ForgottenAt: now},
		{ResourceID: aroID("r1", 7), State: domain.StateCustomerActionNeeded, StateSince: now},
	}
	for _, rec := range recs {
		put(t, st, rec)
	}
	e, err := emitter.New(context.Background(), env.JS, newTelemetry(t, r, otlpreceiver.GRPC),
		emitter.Config{Logger: testenv.Quiet(), Region: "east", Tick: 10 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	all := []domain.Shard{{Index: 0, Of: 4}, {Index: 1, Of: 4}, {Index: 2, Of: 4}, {Index: 3, Of: 4}}
	for range 2 {
		for _, res := range e.EmitShards(testenv.Context(t, 10*time.Second), all) {
			if res.Err != nil {
				t.Fatalf("shard %d: %v", res.Shard.Index, res.Err)
			}
		}
	}
	parts := summaries(t, env.JS)
	if len(parts) != 4 {
		t.Fatalf("%d summary parts, want one per shard (4): %+v", len(parts), parts)
	}
	got := domain.Summary{Counts: map[domain.State]int64{}}
	for _, p := range parts {
		if p.Region != "east" || p.Shards != 4 || !p.At.Equal(now) || p.TickSeconds != 10 {
			t.Errorf("part %+v: want region east, 4 shards, the tick's time, a 10 s tick", p)
		}
		for s, n := range p.Counts {
			got.Counts[s] += n
		}
		got.Updating += p.Updating
		got.Overdue += p.Overdue
		got.Stuck += p.Stuck
		got.Revision += p.Revision
	}
	for s, n := range listCounts(t, env) {
		if got.Counts[s] != n {
			t.Errorf("%s: summary counts %d, list %d", s, got.Counts[s], n)
		}
	}
	if got.Updating != 2 || got.Overdue != 1 || got.Stuck != 1 || got.Revision != uint64(len(recs)) {
		t.Errorf("updating %d, overdue %d, stuck %d, revision %d; want 2, 1, 1, %d", got.Updating, got.Overdue, got.Stuck, got.Revision, len(recs))
	}
}

// Without a region, a run publishes no summary.
func TestEmit_OutsideARegionPublishesNoSummary(t *testing.T) {
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
	if parts := summaries(t, env.JS); len(parts) != 0 {
		t.Errorf("summary parts without a region: %+v", parts)
	}
}

func TestNew_RefusesARegionNameThatIsNoDomain(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	for _, name := range []string{"hub", "East", "eu.west", "-x"} {
		if _, err := emitter.New(context.Background(), env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{Logger: testenv.Quiet(), Region: name}); err == nil {
			t.Errorf("region %q accepted", name)
		}
	}
}

// summaries reads every summary part stored in the region's stream.
func summaries(t testing.TB, js jetstream.JetStream) []domain.Summary {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	s, err := js.Stream(ctx, domain.SummaryStream)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.Summary
	for seq := s.CachedInfo().State.FirstSeq; seq > 0 && seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		p, err := domain.DecodeSummary(m.Data)
		if err != nil {
			t.Fatalf("part %s: %v", m.Subject, err)
		}
		if m.Subject != domain.SummarySubject("east", domain.Shard{Index: p.Shard, Of: p.Shards}) {
			t.Errorf("part of shard %d on %s", p.Shard, m.Subject)
		}
		out = append(out, p)
	}
	return out
}

// listCounts counts the entities per state as `maintctl list` lists them.
func listCounts(t testing.TB, env *testenv.Env) map[domain.State]int64 {
	t.Helper()
	c, err := client.New(env.NC, testenv.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.List(testenv.Context(t, 10*time.Second), "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[domain.State]int64{}
	for _, s := range domain.States {
		out[s] = 0
	}
	for _, en := range l.Entities {
		out[en.Record.State]++
	}
	return out
}
