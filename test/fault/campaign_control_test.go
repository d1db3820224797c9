package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// TestProcess_CampaignFunctionKilledWhileWithdrawing: a campaign announced to every entity,
// some of whose updates have started, is paused with --withdraw, or cancelled. The campaign
// function process is SIGKILLed while its withdrawals are being applied, and started again.
// Every announced entity that had not started is then withdrawn exactly once (one applied None
// of the generation, its record None); the started ones are sent no withdrawal and keep their
// update; the superseded ones and the entities outside the campaign are untouched.
func TestProcess_CampaignFunctionKilledWhileWithdrawing(t *testing.T) {
	needBinary(t)
	for _, action := range []campaign.Action{campaign.ActionPause, campaign.ActionCancel} {
		t.Run(string(action), func(t *testing.T) { killWhileWithdrawing(t, action) })
	}
}

func killWhileWithdrawing(t *testing.T, action campaign.Action) {
	sc := startCampaignScenario(t, campaignEntities(), 50)
	st, ctx, cl, fn, before := sc.st, sc.ctx, sc.cl, sc.fn, sc.before
	announced := announceAll(t, ctx, st.js, cl, sc.ids, before)

	// The updater has started every twentieth announced entity.
	started := map[string]bool{}
	var starts []domain.Command
	for i, id := range announced {
		if i%20 == 0 {
			started[domain.MustKey(id)] = true
			starts = append(starts, domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: id, Task: domain.TaskEverything})
		}
	}
	testenv.PublishAll(t, st.js, starts, nil)
	waitTally(t, cl, "the started updates observed", func(c campaign.Counts) bool { return c.Of(campaign.PhaseInProgress) == len(starts) })

	toWithdraw := len(announced) - len(starts)
	base := appliedCount(t, st.js)
	if _, err := cl.SendCampaign(ctx, campaign.Control{ID: "k1-" + string(action), Campaign: "k1", Action: action, Withdraw: action == campaign.ActionPause}); err != nil {
		t.Fatalf("%s: %v", action, err)
	}
	killAfter(t, st.js, fn, base, toWithdraw, "withdrawals")
	startFunction(t, "campaign-1", "campaign", st.url, procEnv())
	testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d withdrawals", toWithdraw), func() bool { return appliedCount(t, st.js) >= base+toWithdraw })
	time.Sleep(3 * tick) // passes that would withdraw again have had their ticks

	withdrawn := withdrawalsApplied(t, st.js)
	s, err := store.Open(ctx, st.js)
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for _, id := range announced {
		k := domain.MustKey(id)
		rec, _, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var bad string
		switch {
		case started[k] && withdrawn[k] != 0:
			bad = fmt.Sprintf("its update had started and it has %d applied withdrawals", withdrawn[k])
		case started[k] && (rec.State == domain.StateNone || rec.Campaign == nil):
			bad = fmt.Sprintf("its update had started and its record is %s, campaign %v", rec.State, rec.Campaign)
		case !started[k] && withdrawn[k] != 1:
			bad = fmt.Sprintf("%d applied withdrawals, want 1", withdrawn[k])
		case !started[k] && rec.State != domain.StateNone:
			bad = fmt.Sprintf("withdrawn, yet its record is %s", rec.State)
		}
		if bad != "" {
			if wrong++; wrong <= 5 {
				t.Errorf("%s: %s", id, bad)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d announced entities wrong", wrong, len(announced))
	}
	checkUntouched(t, ctx, s, before)

	gone := campaign.PhasePlanned // withdrawn while paused: planned again, announced anew on resume
	if action == campaign.ActionCancel {
		gone = campaign.PhaseCancelled
	}
	// The phases move as the restarted function observes the withdrawals' outcomes.
	waitTally(t, cl, fmt.Sprintf("the phases after the withdrawals: %d %s and %d in progress", toWithdraw, gone, len(starts)), func(ph campaign.Counts) bool {
		return ph.Of(gone) == toWithdraw && ph.Of(campaign.PhaseInProgress) == len(starts) && ph.Of(campaign.PhaseAnnounced) == 0
	})
}

// TestProcess_CampaignFunctionKilledAsProgressCrossesTenths: the updater finishes a
// campaign's entities a tenth at a time, and at each tenth the campaign function process is
// SIGKILLed and started again, once just before it can observe the crossing, once just after
// it has decided the progress event. Each tenth's progress event is then stored exactly once,
// in order, and completed once.
func TestProcess_CampaignFunctionKilledAsProgressCrossesTenths(t *testing.T) {
	needBinary(t)
	const n = 500
	sc := startCampaignScenario(t, n, 0) // every hundredth superseded: done already
	st, ctx, cl, fn, before := sc.st, sc.ctx, sc.cl, sc.fn, sc.before
	announced := announceAll(t, ctx, st.js, cl, sc.ids, before)

	rng := rand.New(rand.NewPCG(26, 3))
	done := len(before.superseded)
	next := 0
	for tenth := 1; tenth <= 10; tenth++ {
		var chunk []domain.Command
		for ; done < tenth*n/10 && next < len(announced); next, done = next+1, done+1 {
			id := announced[next]
			chunk = append(chunk,
				domain.Command{ID: fmt.Sprintf("start-%d", next), ResourceID: id, Task: domain.TaskEverything},
				domain.Command{ID: fmt.Sprintf("end-%d", next), ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
		if len(chunk) == 0 {
			continue // the superseded alone made this tenth
		}
		base := appliedCount(t, st.js)
		testenv.PublishAll(t, st.js, chunk, nil)
		if tenth%2 == 1 {
			// The chunk's outcomes are stored; the function may be observing them.
			testenv.Eventually(t, time.Minute, "the chunk's outcomes", func() bool { return appliedCount(t, st.js) >= base+len(chunk) })
			time.Sleep(time.Duration(rng.Int64N(int64(tick))))
		} else {
			// The crossing is decided: its event is in the campaign's outbox, maybe not out yet.
			waitCampaign(t, cl, fmt.Sprintf("progress %d", tenth), func(c *campaign.Campaign) bool { return c.Progress >= tenth })
		}
		fn.Kill()
		fn = startFunction(t, fmt.Sprintf("campaign-%d", tenth), "campaign", st.url, procEnv())
	}
	waitCampaign(t, cl, "the campaign completed", func(c *campaign.Campaign) bool { return c.Status == campaign.StatusCompleted })

	var progress []int
	completed, created := 0, 0
	read := func() {
		progress, completed, created = nil, 0, 0
		testenv.ReadStream(t, st.js, domain.EventsStream, func(m jetstream.Msg) {
			if m.Subject() != domain.CampaignEventSubject("k1") {
				return
			}
			var ev campaign.Event
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				t.Fatal(err)
			}
			switch ev.Type {
			case campaign.EventProgress:
				progress = append(progress, ev.Done)
			case campaign.EventCompleted:
				completed++
			case campaign.EventCreated:
				created++
			}
		})
	}
	// The state says completed before its outbox is published.
	testenv.Eventually(t, time.Minute, "the completed event", func() bool { read(); return completed > 0 })
	time.Sleep(3 * tick) // passes that would publish again have had their ticks
	read()
	if fmt.Sprint(progress) != "[1 2 3 4 5 6 7 8 9 10]" || completed != 1 || created != 1 {
		t.Errorf("campaign events: progress %v, %d completed, %d created; want each tenth once, in order, and one of each", progress, completed, created)
	}
}

// campaignScenario is a stack with a command function process and a campaign function
// process (fn), n listed entities (ids) and others outside, seeded by seedRecords, and a client.
type campaignScenario struct {
	st     *stack
	ctx    context.Context
	ids    []string
	before seeded
	fn     *proc
	cl     *client.Client
}

func startCampaignScenario(t *testing.T, n, others int) campaignScenario {
	t.Helper()
	st := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	ids := testenv.ResourceIDs("camp", n)
	before := seedRecords(t, ctx, st.js, ids, testenv.ResourceIDs("other", others))
	startFunction(t, "command", "command", st.url, procEnv())
	fn := startFunction(t, "campaign-0", "campaign", st.url, procEnv())
	cl, err := client.New(connectURL(t, st.url), testenv.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	return campaignScenario{st: st, ctx: ctx, ids: ids, before: before, fn: fn, cl: cl}
}

// announceAll creates campaign k1 over ids and waits until the function has observed every
// announcement; it returns the ids announced (all but the superseded).
func announceAll(t *testing.T, ctx context.Context, js jetstream.JetStream, cl *client.Client, ids []string, before seeded) []string {
	t.Helper()
	doc := campaignSpec(t, ctx, js, ids)
	if _, err := cl.SendCampaign(ctx, campaign.Control{ID: "k1-create", Campaign: "k1", Action: campaign.ActionCreate, Spec: &doc}); err != nil {
		t.Fatalf("create: %v", err)
	}
	var announced []string
	for _, id := range ids {
		if _, own := before.superseded[domain.MustKey(id)]; !own {
			announced = append(announced, id)
		}
	}
	waitTally(t, cl, "every announcement observed", func(c campaign.Counts) bool {
		return c.Of(campaign.PhaseAnnounced) == len(announced) && c.Of(campaign.PhaseSuperseded) == len(before.superseded)
	})
	return announced
}

// waitCampaign waits until campaign k1, as the function last stored it, satisfies ok.
func waitCampaign(t *testing.T, cl *client.Client, what string, ok func(*campaign.Campaign) bool) {
	t.Helper()
	var last *campaign.Campaign
	testenv.Eventually(t, 3*time.Minute, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := cl.Campaign(ctx, "k1")
		if err != nil {
			return false
		}
		last = c
		return ok(c)
	})
	t.Logf("%s: %s, progress %d, phases %v", what, last.Status, last.Progress, last.Tally.Total())
}

// waitTally waits until the campaign's phases, as the function last counted them, satisfy ok.
func waitTally(t *testing.T, cl *client.Client, what string, ok func(campaign.Counts) bool) {
	t.Helper()
	waitCampaign(t, cl, what, func(c *campaign.Campaign) bool { return ok(c.Tally.Total()) })
}

// killAfter SIGKILLs fn once a tenth of want outcome events have been stored after base, and
// before nearly all have.
func killAfter(t *testing.T, js jetstream.JetStream, fn *proc, base, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := appliedCount(t, js) - base
		if got >= want/10 {
			if got >= want-want/100 {
				t.Fatalf("nearly all %s were applied (%d of %d) before the kill: the scenario needs a bigger campaign", what, got, want)
			}
			fn.Kill()
			t.Logf("campaign function killed with %d of %d %s applied", got, want, what)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s applied, want %d before the kill", got, what, want/10)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// withdrawalsApplied counts, per entity key, the applied withdrawals of campaign k1.
func withdrawalsApplied(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	out := map[string]int{}
	outcomes := map[domain.Outcome]int{}
	testenv.ReadEntityEvents(t, js, func(m jetstream.Msg) {
		ev, err := domain.DecodeEvent(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		if c, _, withdraw, _, ok := admission.ParseCommandID(ev.CommandID); ok && c == "k1" && withdraw {
			outcomes[ev.Outcome]++
			if ev.Outcome == domain.OutcomeApplied {
				out[domain.MustKey(ev.ResourceID)]++
			}
		}
	})
	t.Logf("outcomes of the withdrawals: %v", outcomes)
	return out
}

// checkUntouched: the superseded entities' records hold their own window, and the entities
// outside the campaign are at the revision they were seeded with.
func checkUntouched(t *testing.T, ctx context.Context, s *store.Store, before seeded) {
	t.Helper()
	for k, want := range before.superseded {
		rec, _, err := s.Get(ctx, k)
		if err != nil || rec.Window == nil || !rec.Window.Start.Equal(want.Window.Start) || rec.Campaign != nil {
			t.Errorf("%s held its own window: record %+v, %v", k, rec, err)
		}
	}
	for k, rev := range before.others {
		if _, got, err := s.Get(ctx, k); err != nil || got != rev {
			t.Errorf("%s outside the campaign: revision %d (was %d), %v", k, got, rev, err)
		}
	}
}
