package regions_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
	"maintsignals/test/testenv"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func part(region string, shard, of int, at time.Time, pending int64) domain.Summary {
	c := map[domain.State]int64{}
	for _, s := range domain.States {
		c[s] = 0
	}
	c[domain.StatePending] = pending
	return domain.Summary{Version: 1, Region: region, Shard: shard, Shards: of, At: at, TickSeconds: 10, Counts: c, Updating: 1, Revision: 5}
}

func TestCombine_JudgesEachRegionByTheTickTimeInsideItsSummary(t *testing.T) {
	tests := []struct {
		name      string
		parts     []domain.Summary
		now       time.Time
		stale     []string
		pending   map[string]int64 // per region
		total     int64
		asOfNames map[string]time.Time
	}{
		{
			name:    "every shard in, within two ticks: fresh, summed",
			parts:   []domain.Summary{part("east", 0, 2, t0, 1), part("east", 1, 2, t0, 2), part("west", 0, 1, t0.Add(-15*time.Second), 4)},
			now:     t0.Add(5 * time.Second),
			stale:   []string{},
			pending: map[string]int64{"east": 3, "west": 4}, total: 7,
		},
		{
			name:    "older than two ticks: stale, out of the totals",
			parts:   []domain.Summary{part("east", 0, 1, t0, 1), part("west", 0, 1, t0.Add(-21*time.Second), 4)},
			now:     t0,
			stale:   []string{"west"},
			pending: map[string]int64{"east": 1, "west": 4}, total: 1,
		},
		{
			name:    "a shard not heard of: stale, no counts",
			parts:   []domain.Summary{part("east", 0, 2, t0, 1), part("west", 0, 1, t0, 4)},
			now:     t0,
			stale:   []string{"east"},
			pending: map[string]int64{"east": 0, "west": 4}, total: 4,
		},
		{
			name:    "the newest part of each shard, the oldest of them the region's time",
			parts:   []domain.Summary{part("east", 0, 2, t0.Add(-10*time.Second), 9), part("east", 0, 2, t0, 1), part("east", 1, 2, t0.Add(-10*time.Second), 2), part("west", 0, 1, t0, 0)},
			now:     t0,
			stale:   []string{},
			pending: map[string]int64{"east": 3, "west": 0}, total: 3,
			asOfNames: map[string]time.Time{"east": t0.Add(-10 * time.Second)},
		},
		{
			name:    "a region never heard of: stale",
			parts:   []domain.Summary{part("east", 0, 1, t0, 1)},
			now:     t0,
			stale:   []string{"west"},
			pending: map[string]int64{"east": 1, "west": 0}, total: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := regions.Combine([]string{"east", "west"}, tc.parts, tc.now)
			if !slices.Equal(v.StaleRegions, tc.stale) {
				t.Errorf("stale %v, want %v", v.StaleRegions, tc.stale)
			}
			for _, r := range v.Regions {
				if got := r.Counts.Counts[domain.StatePending]; got != tc.pending[r.Region] {
					t.Errorf("%s pending %d, want %d", r.Region, got, tc.pending[r.Region])
				}
				if want, ok := tc.asOfNames[r.Region]; ok && (r.AsOf == nil || !r.AsOf.Equal(want)) {
					t.Errorf("%s asOf %v, want %v", r.Region, r.AsOf, want)
				}
				if r.Stale != slices.Contains(tc.stale, r.Region) {
					t.Errorf("%s stale %v", r.Region, r.Stale)
				}
			}
			if v.Totals.Counts[domain.StatePending] != tc.total {
				t.Errorf("total pending %d, want %d", v.Totals.Counts[domain.StatePending], tc.total)
			}
		})
	}
}

// The JSON is the contract's shape: every field present, stale always, null times for a
// region never heard of.
func TestView_JSONHasTheContractsShape(t *testing.T) {
	v := regions.Combine([]string{"east", "west"}, []domain.Summary{part("east", 0, 1, t0, 1)}, t0.Add(time.Second))
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Regions []map[string]any `json:"regions"`
		Totals  map[string]any   `json:"totals"`
		Stale   []string         `json:"staleRegions"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Regions {
		for _, k := range []string{"region", "asOf", "ageSeconds", "tickSeconds", "stale", "counts", "updating", "overdue", "stuck", "conflicts", "campaigns"} {
			if _, ok := r[k]; !ok {
				t.Errorf("region %v has no %q: %s", r["region"], k, b)
			}
		}
	}
	counts, _ := got.Totals["counts"].(map[string]any)
	for _, s := range domain.States {
		if _, ok := counts[string(s)]; !ok {
			t.Errorf("totals have no count of %s: %s", s, b)
		}
	}
	if !slices.Equal(got.Stale, []string{"west"}) || got.Regions[1]["asOf"] != nil {
		t.Errorf("west never heard of: %s", b)
	}
}

// A hub whose sources were set up before its regions existed (they back off) gets their
// summaries within seconds once the keeper runs.
func TestKeeper_SetsUpAgainTheSourcesOfRegionsThatAnswer(t *testing.T) {
	hub := testenv.StartHub(t)
	testenv.ProvisionHub(t, hub, "east", "west")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := &regions.Keeper{JS: hub.JS, Log: testenv.Quiet()}
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	time.Sleep(3 * time.Second) // the hub's sources fail and back off
	envs := map[string]*testenv.Env{}
	for _, name := range []string{"east", "west"} {
		envs[name] = testenv.StartRegion(t, name, hub.Server.LeafURL())
	}
	testenv.WaitLeaf(t, hub.Server, 2)
	for name, env := range envs {
		publish(t, env.JS, part(name, 0, 1, time.Now(), 2))
	}
	testenv.Eventually(t, 15*time.Second, "both regions fresh at the hub", func() bool {
		v, err := regions.Read(testenv.Context(t, 5*time.Second), hub.JS, time.Now(), testenv.Quiet())
		return err == nil && len(v.StaleRegions) == 0 && v.Totals.Counts[domain.StatePending] == 4
	})
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func publish(t testing.TB, js jetstream.JetStream, p domain.Summary) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	sh := domain.Shard{Index: p.Shard, Of: p.Shards}
	if _, err := js.Publish(testenv.Context(t, 5*time.Second), domain.SummarySubject(p.Region, sh), b, jetstream.WithMsgID(domain.SummaryMsgID(p.Region, sh, p.At))); err != nil {
		t.Fatal(err)
	}
}

// A link flapped ten times in twenty seconds leaves the hub as it was: once healed, the region
// is fresh with its newest summary, and no goroutine of the hub's side (its server, the
// keeper) is left behind.
func TestKeeper_AFlappingLinkLeavesNothingBehind(t *testing.T) {
	hub := testenv.StartHub(t)
	link := testenv.StartLink(t, strings.TrimPrefix(hub.Server.LeafURL(), "nats-leaf://"))
	east := testenv.StartRegion(t, "east", link.URL())
	testenv.WaitLeaf(t, hub.Server, 1)
	testenv.ProvisionHub(t, hub, "east")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = (&regions.Keeper{JS: hub.JS, Log: testenv.Quiet()}).Run(ctx) }()
	fresh := func(pending int64) func() bool {
		return func() bool {
			v, err := regions.Read(testenv.Context(t, 5*time.Second), hub.JS, time.Now(), testenv.Quiet())
			return err == nil && len(v.StaleRegions) == 0 && v.Totals.Counts[domain.StatePending] == pending
		}
	}
	publish(t, east.JS, part("east", 0, 1, time.Now(), 1))
	testenv.Eventually(t, 15*time.Second, "east fresh", fresh(1))
	time.Sleep(2 * time.Second) // settled
	before := runtime.NumGoroutine()
	for range 10 {
		link.Cut()
		time.Sleep(time.Second)
		link.Heal()
		time.Sleep(time.Second)
	}
	publish(t, east.JS, part("east", 0, 1, time.Now(), 2))
	testenv.Eventually(t, 15*time.Second, "east fresh with its newest summary", fresh(2))
	var after int
	testenv.Eventually(t, 20*time.Second, "the goroutines of before the flapping", func() bool {
		after = runtime.NumGoroutine()
		return after <= before+5
	})
	t.Logf("goroutines: %d before the flapping, %d after", before, after)
}
