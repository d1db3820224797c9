package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// On the hub, `maintctl regions` shows each region with its freshness: east, which published
// its summary, fresh with its counts in the totals; west, never heard of, stale.
func TestRegions_ShowsEachRegionByItsNewestSummary(t *testing.T) {
	hub := testenv.StartHub(t)
	east := testenv.StartRegion(t, "east", hub.Server.LeafURL())
	testenv.WaitLeaf(t, hub.Server, 1)
	testenv.ProvisionHub(t, hub, "east", "west")
	sh := domain.Shard{Index: 0, Of: 1}
	at := time.Now()
	body, err := json.Marshal(domain.Summary{Version: 1, Region: "east", Shard: 0, Shards: 1, At: at, TickSeconds: 60,
		Counts: map[domain.State]int64{domain.StatePending: 3}, Stuck: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := east.JS.Publish(testenv.Context(t, 5*time.Second), domain.SummarySubject("east", sh), body, jetstream.WithMsgID(domain.SummaryMsgID("east", sh, at))); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, nil)
	c.env["NATS_URL"] = hub.Server.URL()
	var v regions.View
	testenv.Eventually(t, 10*time.Second, "east's summary at the hub", func() bool {
		r := c.run("regions", "-o", "json")
		return r.err == nil && json.Unmarshal([]byte(r.stdout), &v) == nil && len(v.StaleRegions) == 1
	})
	if v.StaleRegions[0] != "west" || v.Totals.Counts[domain.StatePending] != 3 || v.Totals.Stuck != 1 {
		t.Errorf("view %+v: want west stale, east's 3 pending and 1 stuck in the totals", v)
	}
	mustContain(t, "regions table", c.ok("regions"), "REGION", "east", "fresh", "west", "stale", "never heard of")
}

func TestRegions_RefusesAServerThatIsNoHub(t *testing.T) {
	env := testenv.StartListening(t)
	c := newCLI(t, nil)
	c.env["NATS_URL"] = env.Server.URL()
	if r := c.run("regions"); r.code() != exitError || !contains(r.err, "not the hub") {
		t.Errorf("regions on a region: exit %d, %v", r.code(), r.err)
	}
}

func TestUpAndHub_RefuseRegionFlagsThatDoNotGoTogether(t *testing.T) {
	c := newCLI(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--region", "east"}, "go together"},
		{[]string{"up", "--hub", "nats-leaf://127.0.0.1:7422"}, "go together"},
		{[]string{"up", "--region", "hub", "--hub", "nats-leaf://127.0.0.1:7422"}, "the hub's domain"},
		{[]string{"up", "--region", "East", "--hub", "nats-leaf://127.0.0.1:7422"}, "invalid region name"},
		{[]string{"up", "--region", "east", "--hub", "http://127.0.0.1:7422"}, "nats-leaf://"},
		{[]string{"up", "--region", "east", "--hub", "nats://127.0.0.1:7422", "--nodes", "3"}, "one node"},
		{[]string{"hub"}, "--regions"},
	} {
		r := c.run(tc.args...)
		if r.err == nil || !contains(r.err, tc.want) {
			t.Errorf("maintctl %v: %v, want an error saying %q", tc.args, r.err, tc.want)
		}
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// On the hub, get --region reads the record in the region's own domain; a region that does
// not answer is unreachable (exit 1), within the 5 s a region read is given.
func TestGetRegion_ReadsTheRecordWhereTheRegionKeepsIt(t *testing.T) {
	hub := testenv.StartHub(t)
	east := testenv.StartRegion(t, "east", hub.Server.LeafURL())
	testenv.WaitLeaf(t, hub.Server, 1)
	id := "/subscriptions/s1/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
	ctx := testenv.Context(t, 10*time.Second)
	st, err := store.Open(ctx, east.JS)
	if err != nil {
		t.Fatal(err)
	}
	rec := domain.Record{ResourceID: id, State: domain.StatePending, StateSince: time.Now(), Version: domain.RecordVersion}
	if _, err := st.Put(ctx, domain.MustKey(id), store.Versioned{}, rec); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, nil)
	c.env["NATS_URL"] = hub.Server.URL()
	mustContain(t, "get --region east", c.ok("get", "--region", "east", id), "Pending")
	var got struct{ State domain.State }
	if err := json.Unmarshal([]byte(c.ok("get", "--region", "east", "-o", "json", id)), &got); err != nil || got.State != domain.StatePending {
		t.Errorf("get --region east -o json: %+v, %v", got, err)
	}
	if r := c.run("get", id); r.err == nil {
		t.Errorf("get on the hub without --region found a record: %s", r.stdout)
	}
	start := time.Now()
	r := c.run("get", "--region", "west", id)
	if r.code() != exitError || !contains(r.err, "region west unreachable") {
		t.Errorf("get --region west: exit %d, %v", r.code(), r.err)
	}
	if d := time.Since(start); d > 7*time.Second {
		t.Errorf("an unreachable region answered after %s, past its 5 s", d)
	}
}
