package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/store"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// factsID is an entity of the fleet of the facts test, in its one subscription.
func factsID(rg, name string) string {
	return "/subscriptions/s-facts/resourceGroups/" + rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
}

// counts are the facts of a fleet as a reader counts them.
type counts struct {
	Entities  int
	States    map[domain.State]int
	Overdue   int
	Stuck     int
	Conflicts int
}

func (c counts) String() string {
	return fmt.Sprintf("%d entities %v, %d overdue, %d stuck, %d conflicts", c.Entities, c.States, c.Overdue, c.Stuck, c.Conflicts)
}

// countRecords counts the records as shown, by their facts.
func countRecords(recs []fleet.Record) counts {
	c := counts{States: map[domain.State]int{}}
	for _, r := range recs {
		c.Entities++
		c.States[r.State]++
		c.Overdue += b2i(r.Overdue)
		c.Stuck += b2i(r.Stuck)
		c.Conflicts += b2i(r.Conflict)
	}
	return c
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFleetFacts_ListTheWebViewAndTheGaugesAgree builds one fleet with an entity of every fact
// (overdue, stuck, in conflict with a policy set after its window was announced, and their near
// misses) and reads it, once it stops changing, the three ways a user can: `maintctl list -o
// json`, the web view's JSON and the emitter's gauges as exported over OTLP. Each counts the
// same, per state and per fact; list and the web view show every record the same, field for
// field; and `list --prefix …/rg-1` selects what the web view's filter does, never rg-10.
func TestFleetFacts_ListTheWebViewAndTheGaugesAgree(t *testing.T) {
	env := testenv.StartListening(t, testenv.WithTick(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := store.Open(testenv.Context(t, 5*time.Second), env.JS)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC()
	day := now.Add(10 * 24 * time.Hour).Truncate(24 * time.Hour)
	future := &domain.Window{Start: day.Add(2 * time.Hour), End: day.Add(6 * time.Hour)}
	before := now.Add(-time.Hour) // announced before the policy
	fleetRecs := []domain.Record{
		{ResourceID: factsID("rg-1", "overdue"), State: domain.StatePending, Window: &domain.Window{Start: now.Add(-3 * time.Hour), End: now.Add(-time.Hour)}, LastCommandAt: before},
		{ResourceID: factsID("rg-1", "conflict"), State: domain.StatePending, Window: future, LastCommandAt: before},
		{ResourceID: factsID("rg-1", "stuck"), State: domain.StateUnplanned, Updating: true, Task: domain.TaskCertificatesRenewal, UpdatedAt: now.Add(-7 * time.Hour)},
		{ResourceID: factsID("rg-10", "updating"), State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything},
		{ResourceID: factsID("rg-10", "failed"), State: domain.StateNone, LastError: "certificate rotation timed out"},
		{ResourceID: factsID("rg-2", "customer"), State: domain.StateCustomerActionNeeded},
		// In None for longer than the emitter's retention: out of the status points, still an
		// entity in None everywhere.
		{ResourceID: factsID("rg-2", "long-none"), State: domain.StateNone, StateSince: now.Add(-48 * time.Hour)},
	}
	for _, r := range fleetRecs {
		writeRecord(t, st, r, now)
	}
	// A blackout on the windows' day, set after their announcement: a conflict for the one
	// announced before it, none for the one announced after (judged by it).
	testenv.PutPolicy(t, env.JS, "/subscriptions/s-facts", fmt.Sprintf(`"blackouts": [{"start": %q, "end": %q}]`,
		day.Format(time.DateOnly), day.AddDate(0, 0, 1).Format(time.DateOnly)))
	writeRecord(t, st, domain.Record{ResourceID: factsID("rg-10", "announced-after"), State: domain.StatePending, Window: future, LastCommandAt: time.Now().Add(time.Second)}, now)
	settled := time.Now()

	// The exported gauges.
	rcv := otlpreceiver.Start(t)
	tel, err := telemetry.Setup(ctx, telemetry.Config{Endpoint: rcv.Endpoint(otlpreceiver.GRPC), Protocol: otlpreceiver.GRPC,
		Interval: 250 * time.Millisecond, Timeout: time.Second, ReconnectMaxDelay: 200 * time.Millisecond, Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	emitted := make(chan error, 1)
	go func() {
		emitted <- emitter.Run(ctx, env.JS, tel, emitter.Config{ExportTimeout: 800 * time.Millisecond, Logger: testenv.Quiet()})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-emitted; err != nil {
			t.Errorf("emitter: %v", err)
		}
	})

	// The web view.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	view, err := web.New(env.JS, web.Config{Listen: ln.Addr().String(), Retry: 200 * time.Millisecond, Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- view.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	webURL := "http://" + ln.Addr().String()

	c := newCLI(t, nil)
	c.env["NATS_URL"] = env.Server.URL()
	list := decodeJSON[[]fleet.Record](t, c.ok("list", "-o", "json"))
	last := uint64(0)
	for _, r := range list {
		last = max(last, r.Revision)
	}
	want := counts{Entities: 8, States: map[domain.State]int{domain.StatePending: 3, domain.StateUnplanned: 1, domain.StatePlanned: 1,
		domain.StateNone: 2, domain.StateCustomerActionNeeded: 1}, Overdue: 1, Stuck: 1, Conflicts: 1}
	if got := countRecords(list); got.String() != want.String() {
		t.Fatalf("list counts %v, want %v", got, want)
	}

	// The web view, once it holds the bucket up to the last revision and the policy.
	var page web.FleetPage
	testenv.Eventually(t, 10*time.Second, "the web view at the last revision, with the policy", func() bool {
		code, p := fleetPage(t, webURL, "limit=500")
		page = p
		return code == http.StatusOK && len(p.Rows) == len(list) && slices.ContainsFunc(p.Rows, func(r fleet.Record) bool { return r.Revision == last }) && p.Conflicts == 1
	})
	webCounts := counts{Entities: page.Entities, States: map[domain.State]int{}, Overdue: page.Overdue, Stuck: page.Stuck, Conflicts: page.Conflicts}
	for s, n := range page.States {
		if n > 0 {
			webCounts.States[s] = n
		}
	}
	if webCounts.String() != want.String() {
		t.Errorf("web view counts %v, want %v (list's)", webCounts, want)
	}
	if rows := countRecords(page.Rows); rows.String() != want.String() {
		t.Errorf("web view rows count %v, want %v", rows, want)
	}
	// One shape: every record as list shows it is the web view's row and get's record, field
	// for field (the policy in force included).
	for i := range list {
		if l, w := asJSON(t, list[i]), asJSON(t, page.Rows[i]); l != w {
			t.Errorf("a record shown two ways:\nlist %s\nweb  %s", l, w)
		}
		if l, g := asJSON(t, list[i]), asJSON(t, decodeJSON[fleet.Record](t, c.ok("get", list[i].ResourceID, "-o", "json"))); l != g {
			t.Errorf("a record shown two ways:\nlist %s\nget  %s", l, g)
		}
	}

	// The gauges of the first whole emission of a tick after the fleet settled.
	var gauges counts
	testenv.Eventually(t, 15*time.Second, "a whole emission after the fleet settled", func() bool {
		for _, em := range rcv.Emissions(domain.DefaultShards) {
			if em.Tick.After(settled) {
				gauges = gaugeCounts(em.Export)
				return true
			}
		}
		return false
	})
	if gauges.String() != want.String() {
		t.Errorf("gauges %v, want %v (list's and the web view's)", gauges, want)
	}

	// A prefix ends at a path segment, the same for list and the web view.
	rg1 := decodeJSON[[]fleet.Record](t, c.ok("list", "--prefix", "/subscriptions/S-FACTS/resourceGroups/rg-1", "-o", "json"))
	_, p := fleetPage(t, webURL, "prefix="+url.QueryEscape("/subscriptions/S-FACTS/resourceGroups/rg-1"))
	if got, web := keysOf(rg1), keysOf(p.Rows); len(got) != 3 || !slices.Equal(got, web) || p.Matches != 3 {
		t.Errorf("under …/rg-1: list %v, web view %v (%d matches); want rg-1's three", got, web, p.Matches)
	}
}

// writeRecord stores r as a command stored at now would have written it (its own times where
// it gives them).
func writeRecord(t *testing.T, st *store.Store, r domain.Record, now time.Time) {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	key := domain.MustKey(r.ResourceID)
	prev, rev, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r.Version = domain.RecordVersion
	r.LastCommandID = "facts-" + key[len(key)-8:]
	r.LastCommandSeq = prev.LastCommandSeq + 1
	if r.StateSince.IsZero() {
		r.StateSince = now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = now
	}
	if r.LastCommandAt.IsZero() {
		r.LastCommandAt = now
	}
	if _, err := st.Put(ctx, key, store.Versioned{Record: prev, Rev: rev}, r); err != nil {
		t.Fatal(err)
	}
}

// fleetPage reads the web view's fleet JSON with a query.
func fleetPage(t *testing.T, base, query string) (int, web.FleetPage) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/?"+query, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p web.FleetPage
	_ = json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, p
}

// gaugeCounts sums the fleet gauges of an emission over its shards.
func gaugeCounts(e otlpreceiver.Export) counts {
	c := counts{States: map[domain.State]int{}}
	for _, p := range e.Find(emitter.MetricEntities, nil) {
		if s, ok := domain.ParseStateLoose(p.Attrs[emitter.AttrState]); ok && p.Value > 0 {
			c.States[s] += int(p.Value)
			c.Entities += int(p.Value)
		}
	}
	sum := func(metric string) (n int) {
		for _, p := range e.Find(metric, nil) {
			n += int(p.Value)
		}
		return n
	}
	c.Overdue, c.Stuck, c.Conflicts = sum(emitter.MetricOverdue), sum(emitter.MetricStuck), sum(emitter.MetricConflicts)
	return c
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func keysOf(recs []fleet.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}
