package fault

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// campaignEntities is the size of the campaign the process scenario announces: 20,000 with
// MAINT_SCALE=1 (a CI step of its own), 4,000 otherwise.
func campaignEntities() int {
	if os.Getenv("MAINT_SCALE") != "" {
		return 20000
	}
	return 4000
}

// TestProcess_CampaignFunctionKilledWhileAnnouncing runs `maintctl function command` and
// `maintctl function campaign` as processes and creates a campaign whose every window is due
// at once. The campaign function is SIGKILLed while its announcements are being applied, and
// started again. Every entity then has exactly one applied Pending of the generation, its
// record holds the planned window; the 1 % that held an SRE's own window are superseded with
// their records as they were; records outside the campaign are untouched.
func TestProcess_CampaignFunctionKilledWhileAnnouncing(t *testing.T) {
	needBinary(t)
	n := campaignEntities()
	sc := startCampaignScenario(t, n, 50)
	st, ctx, cl, fn, ids, before := sc.st, sc.ctx, sc.cl, sc.fn, sc.ids, sc.before
	doc := campaignSpec(t, ctx, st.js, ids)
	if _, err := cl.SendCampaign(ctx, campaign.Control{ID: "k1-create", Campaign: "k1", Action: campaign.ActionCreate, Spec: &doc}); err != nil {
		t.Fatalf("create: %v", err)
	}
	// Kill it once a tenth is applied and before the last is.
	for {
		got := appliedCount(t, st.js)
		if got >= n/10 {
			if got >= n-n/100 {
				t.Fatalf("every announcement was applied (%d) before the kill: the scenario needs a bigger campaign", got)
			}
			fn.Kill()
			t.Logf("campaign function killed with %d of %d announcements applied", got, n)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d announcements applied, want %d before the kill", got, n/10)
		}
		time.Sleep(5 * time.Millisecond)
	}
	startFunction(t, "campaign-1", "campaign", st.url, procEnv())
	want := n - len(before.superseded)
	testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d applied announcements", want), func() bool { return appliedCount(t, st.js) >= want })
	// The count holds the superseded entities' refusals too: wait for the function to have
	// observed every announcement.
	waitTally(t, cl, "every announcement observed", func(c campaign.Counts) bool {
		return c.Of(campaign.PhaseAnnounced) == want && c.Of(campaign.PhaseSuperseded) == len(before.superseded)
	})
	time.Sleep(3 * tick) // passes that would announce again have had their ticks

	checkAnnouncedOnce(t, st.js, ids, before)
	checkRecordsArePlan(t, ctx, st.js, cl, before)
}

// seeded is what the scenario put in the bucket before the campaign: the records of the
// entities that hold their own window (superseded) and of entities outside the campaign.
type seeded struct {
	superseded map[string]domain.Record
	others     map[string]uint64 // key: revision
}

// seedRecords gives every hundredth listed entity an SRE's own window, and each of others a
// Pending of its own.
func seedRecords(t *testing.T, ctx context.Context, js jetstream.JetStream, ids, others []string) seeded {
	t.Helper()
	s, err := store.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	own := domain.Window{Start: now.Add(5 * time.Hour), End: now.Add(6 * time.Hour)}
	rec := func(id string) domain.Record {
		return domain.Record{ResourceID: id, State: domain.StatePending, Window: &own, Reason: "the SRE's own",
			StateSince: now, UpdatedAt: now, Version: domain.RecordVersion}
	}
	out := seeded{superseded: map[string]domain.Record{}, others: map[string]uint64{}}
	for i := 0; i < len(ids); i += 100 {
		r := rec(ids[i])
		if _, err := s.Put(ctx, domain.MustKey(ids[i]), store.Versioned{}, r); err != nil {
			t.Fatal(err)
		}
		out.superseded[domain.MustKey(ids[i])] = r
	}
	for _, id := range others {
		rev, err := s.Put(ctx, domain.MustKey(id), store.Versioned{}, rec(id))
		if err != nil {
			t.Fatal(err)
		}
		out.others[domain.MustKey(id)] = rev
	}
	return out
}

// campaignSpec stores the list of ids and returns a campaign over it whose windows lie from
// three hours on, every one announced at once.
func campaignSpec(t *testing.T, ctx context.Context, js jetstream.JetStream, ids []string) campaignspec.Document {
	t.Helper()
	ref := testenv.UploadList(t, ctx, js, ids)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	return campaignspec.Document{ID: "k1", Reason: "control plane upgrade", Task: domain.TaskEverything,
		Selection: campaignspec.SelectionDocument{List: &ref},
		Window: campaignspec.WindowDocument{Length: "1h", Earliest: earliest.Format(time.RFC3339),
			Deadline: earliest.Add(72 * time.Hour).Format(time.RFC3339)},
		Spread:       campaignspec.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: len(ids)/8 + 1, MaxPerSlotPerSubscription: 10},
		AnnounceLead: "336h"}
}

// appliedCount is the number of outcome events stored on the entities' subjects (the
// campaign's own events are on others).
func appliedCount(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	return int(testenv.StoredMsgs(js, domain.EventsStreams()...))
}

// checkAnnouncedOnce: each listed entity has exactly one applied Pending of generation 1 of
// the campaign, except the superseded ones, which have none; no other entity has an event.
func checkAnnouncedOnce(t *testing.T, js jetstream.JetStream, ids []string, before seeded) {
	t.Helper()
	applied, outcomes := map[string]int{}, map[domain.Outcome]int{}
	testenv.ReadEntityEvents(t, js, func(m jetstream.Msg) {
		ev, err := domain.DecodeEvent(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		c, gen, withdraw, _, ok := admission.ParseCommandID(ev.CommandID)
		if !ok || c != "k1" || gen != 1 || withdraw || ev.Task != domain.TaskPending {
			t.Errorf("an event of another command: %+v", ev)
			return
		}
		outcomes[ev.Outcome]++
		if ev.Outcome == domain.OutcomeApplied {
			applied[domain.MustKey(ev.ResourceID)]++
		}
	})
	t.Logf("outcomes of the announcements: %v", outcomes)
	for _, id := range ids {
		k := domain.MustKey(id)
		_, own := before.superseded[k]
		switch got := applied[k]; {
		case own && got != 0:
			t.Errorf("%s held its own window and has %d applied announcements", id, got)
		case !own && got != 1:
			t.Errorf("%s has %d applied announcements, want 1", id, got)
		}
	}
}

// checkRecordsArePlan: every record of the campaign holds the window its entity was planned;
// the superseded ones and the others are as they were.
func checkRecordsArePlan(t *testing.T, ctx context.Context, js jetstream.JetStream, cl *client.Client, before seeded) {
	t.Helper()
	s, err := store.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	err = cl.CampaignEntities(ctx, "k1", func(e campaignstore.Stored) error {
		rec, _, err := s.Get(ctx, e.Key)
		if err != nil {
			return err
		}
		if want, own := before.superseded[e.Key]; own {
			if e.Entity.Phase != campaign.PhaseSuperseded || !rec.Window.Start.Equal(want.Window.Start) || rec.Campaign != nil {
				t.Errorf("%s held its own window: phase %s, record %+v", e.Key, e.Entity.Phase, rec)
			}
			return nil
		}
		ok := e.Entity.Phase == campaign.PhaseAnnounced && e.Entity.Window != nil && rec.State == domain.StatePending &&
			rec.Window != nil && rec.Window.Start.Equal(e.Entity.Window.Start) && rec.Window.End.Equal(e.Entity.Window.End) &&
			rec.Campaign != nil && *rec.Campaign == (domain.CampaignRef{ID: "k1", Generation: 1})
		if !ok {
			wrong++
		}
		if !ok && wrong <= 5 {
			t.Errorf("%s: phase %s window %v, record %s %v %v", e.Key, e.Entity.Phase, e.Entity.Window, rec.State, rec.Window, rec.Campaign)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if wrong > 0 {
		t.Errorf("%d records differ from the plan", wrong)
	}
	for k, rev := range before.others {
		if _, got, err := s.Get(ctx, k); err != nil || got != rev {
			t.Errorf("%s outside the campaign: revision %d (was %d), %v", k, got, rev, err)
		}
	}
}
