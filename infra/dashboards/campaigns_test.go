package dashboards_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/telemetry"
	"maintsignals/test/testenv"
)

// The campaigns the campaigns dashboard is checked against, on a real stack: the command
// function, the campaign function and its burndown exported over OTLP to Prometheus 3.
//
//   - rollout: a first wave of six entities, announced at once, which the updater works on
//     (one in progress, one succeeded, one failed, one cleared by an SRE, two still
//     announced); a second wave of four, planned until the first is finished; two entities
//     no wave covers, skipped. Active, its deadline three days away.
//   - halted: one wave of four with a failureThreshold of 10 %: one failure halts it. Its
//     deadline is less than 24 h away with most of it not done: at risk.
const (
	campaignRollout = "dash-rollout"
	campaignHalted  = "dash-halted"
)

// campaignOfCampaignsDashboard is the campaign the campaigns dashboard's variable is set to.
const campaignOfCampaignsDashboard = campaignRollout

func campaignEntity(sub string, i int) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/rg-dash/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%02d", sub, i)
}

func campaignList(subs map[string]int) []string {
	var out []string
	for _, sub := range []string{"sub-first", "sub-second", "sub-none", "sub-halt"} {
		for i := range subs[sub] {
			out = append(out, campaignEntity(sub, i))
		}
	}
	return out
}

// campaignsSent is the campaigns as stored after the last tick, and after the first (at
// firstAt, before the updater worked), for the expectations.
type campaignsSent struct {
	start     time.Time
	campaigns map[string]*core.Campaign
	firstAt   time.Time
	first     map[string]*core.Campaign
}

// campaignStack is the stack the campaigns run on; ticks are driven by the test.
type campaignStack struct {
	env  *testenv.Env
	tel  *telemetry.Telemetry
	fn   *campaign.Function
	cl   *client.Client
	sent int
}

// startCampaigns starts Prometheus and the stack, creates both campaigns, serves a tick,
// has the updater work, serves another tick, with the SDK instruments flushed after each, and
// returns the Prometheus that received it all.
func startCampaigns(t *testing.T) (*testenv.Prometheus, campaignsSent) {
	t.Helper()
	prom, tel := startTelemetry(t)
	s := &campaignStack{env: testenv.Start(t), tel: tel}
	ctx := testenv.Context(t, 2*time.Minute)
	serveCommands(t, s.env, tel)
	var err error
	if s.fn, err = campaign.New(ctx, s.env.JS, campaign.Config{Logger: testenv.Quiet(), Meters: tel.MeterProvider(), Telemetry: tel}); err != nil {
		t.Fatal(err)
	}
	// Campaign commands are served; ticks come from the test alone.
	serve(t, "campaign function", func(ctx context.Context) error { return function.Run(ctx, s.env.JS, s.fn.RuntimeConfigs()[0]) })
	if s.cl, err = client.New(s.env.NC, nil); err != nil {
		t.Fatal(err)
	}

	sent := campaignsSent{start: time.Now().UTC().Truncate(time.Second)}
	earliest := sent.start.Truncate(time.Hour).Add(3 * time.Hour)
	s.create(t, ctx, campaignList(map[string]int{"sub-first": 6, "sub-second": 4, "sub-none": 2}), campaignspec.Document{
		ID: campaignRollout, Reason: "control plane upgrade", Task: domain.TaskEverything,
		Window: campaignspec.WindowDocument{Length: "1h", Earliest: earliest.Format(time.RFC3339), Deadline: earliest.Add(72 * time.Hour).Format(time.RFC3339)},
		Spread: campaignspec.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: 50, MaxPerSlotPerSubscription: 20}, AnnounceLead: "336h",
		Waves: []campaignspec.WaveDocument{
			{Name: "first", Prefixes: []string{"/subscriptions/sub-first"}},
			{Name: "second", Prefixes: []string{"/subscriptions/sub-second"}},
		},
	})
	s.create(t, ctx, campaignList(map[string]int{"sub-halt": 4}), campaignspec.Document{
		ID: campaignHalted, Reason: "certificates renewal", Task: domain.TaskEverything,
		Window: campaignspec.WindowDocument{Length: "1h", Earliest: earliest.Format(time.RFC3339), Deadline: earliest.Add(12 * time.Hour).Format(time.RFC3339)},
		Spread: campaignspec.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: 50, MaxPerSlotPerSubscription: 20}, AnnounceLead: "336h",
		Waves: []campaignspec.WaveDocument{{Name: "all", FailureThreshold: "10%"}},
	})
	first, halt := campaignList(map[string]int{"sub-first": 6}), campaignList(map[string]int{"sub-halt": 4})
	s.tickUntil(t, ctx, "the first waves announced", func() bool { return s.announced(ctx, append(append([]string{}, first...), halt...)) })
	sent.first, sent.firstAt = s.campaigns(t, ctx), time.Now()
	if r := sent.first[campaignRollout].Tally.Total(); r.Of(core.PhaseAnnounced) != 6 || r.Of(core.PhasePlanned) != 4 || r.Of(core.PhaseSkipped) != 2 {
		t.Fatalf("campaign %s after the first tick: %v, want 6 announced, 4 planned, 2 skipped", campaignRollout, r)
	}
	// The announcements applied, the updater works.
	s.send(t, ctx, first[0], domain.TaskEverything)
	s.send(t, ctx, first[1], domain.TaskEverything, domain.TaskUpdateSucceeded)
	s.send(t, ctx, first[2], domain.TaskEverything, domain.TaskUpdateFailed)
	s.send(t, ctx, first[3], domain.TaskNone)
	s.send(t, ctx, halt[0], domain.TaskEverything, domain.TaskUpdateFailed)
	s.send(t, ctx, halt[1], domain.TaskEverything)
	// The next tick's points must come after firstAt, as a later tick's would.
	time.Sleep(10 * time.Millisecond)
	s.tickUntil(t, ctx, "the updater's work observed", func() bool {
		c := s.campaigns(t, ctx)
		r := c[campaignRollout].Tally.Total()
		return r.Of(core.PhaseAnnounced) == 2 && c[campaignHalted].Status == core.StatusHalted
	})
	sent.campaigns = s.campaigns(t, ctx)
	// What the panels are checked on must be there: every kind of phase the updater made,
	// and both statuses.
	r := sent.campaigns[campaignRollout].Tally.Total()
	for p, n := range map[core.Phase]int{core.PhasePlanned: 4, core.PhaseAnnounced: 2, core.PhaseInProgress: 1, core.PhaseSucceeded: 1,
		core.PhaseFailed: 1, core.PhaseCleared: 1, core.PhaseSkipped: 2} {
		if r.Of(p) != n {
			t.Fatalf("campaign %s: %d %s, want %d (phases %v)", campaignRollout, r.Of(p), p, n, r)
		}
	}
	if st := sent.campaigns[campaignRollout].Status; st != core.StatusActive {
		t.Fatalf("campaign %s is %s, want active", campaignRollout, st)
	}
	if st := sent.campaigns[campaignHalted].Status; st != core.StatusHalted {
		t.Fatalf("campaign %s is %s, want halted (phases %v)", campaignHalted, st, sent.campaigns[campaignHalted].Tally.Total())
	}
	return prom, sent
}

// startTelemetry starts Prometheus 3 and the telemetry exporting to it over OTLP
// http/protobuf, flushed by the tests.
func startTelemetry(t *testing.T) (*testenv.Prometheus, *telemetry.Telemetry) {
	t.Helper()
	prom := testenv.StartPrometheus(t)
	t.Setenv(telemetry.EnvEndpoint, prom.OTLPEndpoint())
	t.Setenv(telemetry.EnvProtocol, telemetry.ProtocolHTTP)
	t.Setenv(telemetry.EnvMetricsEndpoint, "")
	t.Setenv(telemetry.EnvMetricsExporter, "")
	tel, err := telemetry.Setup(testenv.Context(t, time.Minute), telemetry.Config{Interval: time.Hour, Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if tel.Mode() != telemetry.ModeOTLPHTTP {
		t.Fatalf("telemetry mode %s, want %s", tel.Mode(), telemetry.ModeOTLPHTTP)
	}
	return prom, tel
}

// create uploads the list and creates the campaign over it.
func (s *campaignStack) create(t *testing.T, ctx context.Context, ids []string, doc campaignspec.Document) {
	t.Helper()
	ref := testenv.UploadList(t, ctx, s.env.JS, ids)
	doc.Selection = campaignspec.SelectionDocument{List: &ref}
	o, err := s.cl.SendCampaign(ctx, core.Control{ID: "create-" + doc.ID, Campaign: doc.ID, Action: core.ActionCreate, Spec: &doc})
	if err != nil || o.Outcome != domain.OutcomeApplied {
		t.Fatalf("create %s: %+v %v", doc.ID, o, err)
	}
}

// tick serves one tick of the campaign function (a pass over every campaign and the export
// of the burndown), then flushes the SDK instruments, as one periodic collection would.
func (s *campaignStack) tick(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := s.fn.HandleTick(ctx, function.Message{}); err != nil {
		t.Fatal(err)
	}
	if err := s.tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}

// campaigns reads both campaigns as stored.
func (s *campaignStack) campaigns(t *testing.T, ctx context.Context) map[string]*core.Campaign {
	t.Helper()
	out := map[string]*core.Campaign{}
	for _, id := range []string{campaignRollout, campaignHalted} {
		c, err := s.cl.Campaign(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = c
	}
	return out
}

// announced reports whether every entity's record holds its campaign's window.
func (s *campaignStack) announced(ctx context.Context, ids []string) bool {
	for _, id := range ids {
		e, err := s.cl.Get(ctx, id)
		if err != nil || e.Record.Campaign == nil || e.Record.State != domain.StatePending {
			return false
		}
	}
	return true
}

// tickUntil serves ticks until cond holds. A pass that meets a change of its campaign (the
// outbox of a command being cleared) leaves the rest to the next tick, as in production,
// where the next tick comes a minute later.
func (s *campaignStack) tickUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for range 10 {
		s.tick(t, ctx)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if cond() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Fatalf("ten ticks, and still not %s", what)
}

// send sends the updater's (or an SRE's) commands to one entity in order, each waiting for
// its outcome.
func (s *campaignStack) send(t *testing.T, ctx context.Context, id string, tasks ...domain.Task) {
	t.Helper()
	for _, task := range tasks {
		s.sent++
		c := domain.Command{ID: fmt.Sprintf("dash-campaign-%d", s.sent), ResourceID: id, Task: task}
		if task == domain.TaskUpdateFailed {
			c.Error = "timed out"
		}
		res, err := s.cl.Send(ctx, c)
		if err != nil || res.Event.Outcome != domain.OutcomeApplied {
			t.Fatalf("%s %s: %+v %v", task, id, res, err)
		}
	}
}

// campaignExpectations are, per panel title, per query refId, what the campaigns of
// startCampaigns make the queries of the campaigns dashboard return: the stored phases and
// statuses after the last tick.
func campaignExpectations(c campaignsSent, queriedAt time.Time) map[string]map[string]map[string]want {
	byID := func(id string) map[string]string { return map[string]string{"maintenance_campaign_id": id} }
	ids := []string{campaignRollout, campaignHalted}
	perCampaign := func(v func(*core.Campaign) float64) want {
		var out []series
		for _, id := range ids {
			out = append(out, series{byID(id), eq(v(c.campaigns[id]))})
		}
		return want{series: out}
	}
	total := func(cp *core.Campaign) float64 { return float64(cp.Tally.Total().Total()) }
	done := func(cp *core.Campaign) float64 { return float64(cp.Tally.Total().Done()) }
	deadline := func(cp *core.Campaign) float64 { return float64(cp.Compiled().Deadline.UnixMilli()) }
	one := func(c check) want { return want{series: []series{{nil, c}}} }
	r := c.campaigns[campaignOfCampaignsDashboard]
	phases := r.Tally.Total()
	perPhase := map[string]map[string]want{}
	var phaseSeries []series
	for _, p := range core.Phases {
		phaseSeries = append(phaseSeries, series{map[string]string{"maintenance_campaign_phase": string(p)}, eq(float64(phases.Of(p)))})
	}
	// The stacked burndown: one query per phase, done at the bottom.
	order := []core.Phase{
		core.PhaseSucceeded, core.PhaseSkipped, core.PhaseSuperseded, core.PhaseCleared, core.PhaseCancelled,
		core.PhaseFailed, core.PhaseRejected, core.PhaseOverdue,
		core.PhaseInProgress, core.PhaseAnnounced, core.PhasePlanned,
	}
	perPhase["Entities per phase over time"] = map[string]want{}
	for i, p := range order {
		perPhase["Entities per phase over time"][string(rune('A'+i))] = one(eq(float64(phases.Of(p))))
	}
	var statuses []series
	for _, st := range core.Statuses {
		v := 0.0
		if st == r.Status {
			v = 1
		}
		statuses = append(statuses, series{map[string]string{"maintenance_campaign_status": string(st)}, eq(v)})
	}
	return map[string]map[string]map[string]want{"campaigns.json": {
		"Campaigns under way":          {"A": one(eq(2))},
		"Halted campaigns":             {"A": one(eq(1))},
		"Deadlines at risk":            {"A": one(eq(1))},
		"Since the last campaign pass": {"A": one(within(0, queriedAt.Sub(c.start).Seconds()+1))},
		"Campaigns": {
			"A": {series: []series{
				{map[string]string{"maintenance_campaign_id": campaignRollout, "maintenance_campaign_status": "active"}, eq(1)},
				{map[string]string{"maintenance_campaign_id": campaignHalted, "maintenance_campaign_status": "halted"}, eq(1)},
			}},
			"B": perCampaign(total),
			"C": perCampaign(func(cp *core.Campaign) float64 { return done(cp) / total(cp) }),
			"D": perCampaign(deadline),
		},
		"Campaign function passes":     {"A": {series: []series{{map[string]string{"outcome": "success"}, positive}}}},
		"Status":                       {"A": {series: []series{{map[string]string{"maintenance_campaign_status": string(r.Status)}, eq(1)}}}},
		"Entities":                     {"A": one(eq(total(r)))},
		"Done":                         {"A": one(eq(done(r) / total(r)))},
		"Not finished":                 {"A": one(eq(total(r) - float64(phases.Finished())))},
		"Failed":                       {"A": one(eq(float64(phases.Of(core.PhaseFailed))))},
		"Deadline":                     {"A": one(eq(deadline(r)))},
		"Entities per phase":           {"A": {series: phaseSeries}},
		"Entities per phase over time": perPhase["Entities per phase over time"],
		"Burndown": {
			"A": one(eq(total(r) - float64(phases.Finished()))),
			"B": one(eq(done(r))),
			"C": one(eq(float64(phases.Of(core.PhaseFailed)))),
		},
		"Status over time": {"A": {series: statuses}},
	}}
}
