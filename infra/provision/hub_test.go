package provision_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
	"maintsignals/test/testenv"
)

// The hub's stream gets each region's summaries through the leaf links, by their regions'
// JetStream APIs, while what is private to a region (its commands, records, ticks) stays in
// it: a command sent in east is stored in east alone.
func TestHub_SourcesEachRegionsSummariesAndNothingElseCrosses(t *testing.T) {
	hub := testenv.StartHub(t)
	east := testenv.StartRegion(t, "east", hub.Server.LeafURL())
	west := testenv.StartRegion(t, "west", hub.Server.LeafURL())
	testenv.WaitLeaf(t, hub.Server, 2)
	testenv.ProvisionHub(t, hub, "east", "west")
	ctx := testenv.Context(t, 30*time.Second)
	for _, r := range []struct {
		name string
		env  *testenv.Env
	}{{"east", east}, {"west", west}} {
		sh := domain.Shard{Index: 0, Of: 1}
		at := time.Now()
		body := []byte(`{"version":1,"region":"` + r.name + `","shard":0,"shards":1,"at":"` + at.UTC().Format(time.RFC3339Nano) + `","tickSeconds":1}`)
		for range 2 { // the same part twice: one copy
			if _, err := r.env.JS.Publish(ctx, domain.SummarySubject(r.name, sh), body, jetstream.WithMsgID(domain.SummaryMsgID(r.name, sh, at))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := east.JS.Publish(ctx, domain.CommandSubject("k1"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "both regions' summaries in the hub", func() bool {
		return streamMsgs(ctx, hub.JS, domain.RegionsStream) == 2
	})
	for _, subj := range []string{"maint.summary.east.0", "maint.summary.west.0"} {
		if _, err := streamOf(ctx, t, hub.JS, domain.RegionsStream).GetLastMsgForSubject(ctx, subj); err != nil {
			t.Errorf("%s in the hub: %v", subj, err)
		}
	}
	time.Sleep(500 * time.Millisecond) // what would leak has had the time to
	if n := streamMsgs(ctx, west.JS, domain.CommandsStream); n != 0 {
		t.Errorf("west stored %d commands sent in east", n)
	}
	if n := streamMsgs(ctx, west.JS, domain.SummaryStream); n != 1 {
		t.Errorf("west holds %d summaries, want its own one", n)
	}
}

// A region added to the hub's list becomes a source of its stream; one run more changes
// nothing.
func TestHub_RegionsAreItsStreamsSources(t *testing.T) {
	hub := testenv.StartHub(t)
	testenv.ProvisionHub(t, hub, "east")
	ctx := testenv.Context(t, 10*time.Second)
	for _, tc := range []struct {
		regions []string
		want    provision.Action
	}{
		{[]string{"east", "west"}, provision.Updated},
		{[]string{"east", "west"}, provision.Unchanged},
	} {
		ch, err := provision.Hub(ctx, hub.JS, provision.HubConfig{Regions: tc.regions})
		if err != nil || ch.Action != tc.want {
			t.Fatalf("Hub(%v) = %v, %v; want %s", tc.regions, ch, err, tc.want)
		}
		got := regions.SourceRegions(streamOf(ctx, t, hub.JS, domain.RegionsStream).CachedInfo().Config.Sources)
		if !slices.Equal(got, tc.regions) {
			t.Errorf("sources %v, want %v", got, tc.regions)
		}
	}
	if _, err := provision.Hub(ctx, hub.JS, provision.HubConfig{Regions: []string{"hub"}}); err == nil {
		t.Error("a region named hub accepted")
	}
}

func streamOf(ctx context.Context, t testing.TB, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func streamMsgs(ctx context.Context, js jetstream.JetStream, name string) uint64 {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.Msgs
}
