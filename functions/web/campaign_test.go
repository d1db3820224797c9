package web_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/web"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

const campaignSpec = `{"id": "pucm-2026-12", "reason": "PUCM: control plane upgrade", "task": "Everything",
 "selection": {"prefixes": ["/subscriptions/s1", "/subscriptions/s2"]},
 "window": {"length": "4h", "earliest": "2026-12-15T00:00:00Z", "deadline": "2027-01-15T00:00:00Z"},
 "spread": {"across": "336h", "slot": "15m", "maxPerSlot": 500},
 "announceLead": "336h",
 "waves": [{"name": "canary", "prefixes": ["/subscriptions/s1"], "gate": "manual"}, {"name": "rest", "failureThreshold": "2%"}]}`

// campaignStore writes what the campaign function stores, as it stores it.
type campaignStore struct {
	t        *testing.T
	js       jetstream.JetStream
	states   jetstream.KeyValue
	entities jetstream.KeyValue
}

func newCampaignStore(t *testing.T, js jetstream.JetStream) *campaignStore {
	ctx := testenv.Context(t, 10*time.Second)
	// Provisioning makes the buckets; a deployment provisioned before campaigns has none.
	bucket := func(name string) jetstream.KeyValue {
		kv, err := js.KeyValue(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name})
		}
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	states, entities := bucket(domain.CampaignsBucket), bucket(domain.CampaignEntitiesBucket)
	// The campaigns' events go to MAINT_EVENTS too, on subjects of their own.
	st, err := js.Stream(ctx, domain.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if !slices.Contains(cfg.Subjects, domain.CampaignEventPrefix+"*") {
		cfg.Subjects = append(cfg.Subjects, domain.CampaignEventPrefix+"*")
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return &campaignStore{t: t, js: js, states: states, entities: entities}
}

func (cs *campaignStore) putCampaign(c *campaign.Campaign) {
	b, err := c.Encode()
	if err != nil {
		cs.t.Fatal(err)
	}
	if _, err := cs.states.Put(context.Background(), c.ID, b); err != nil {
		cs.t.Fatal(err)
	}
}

func (cs *campaignStore) putEntity(id, resourceID string, wave int, p campaign.Phase) {
	b, err := campaign.EncodeEntity(campaign.Entity{Phase: p, ResourceID: resourceID, Generation: 1, Wave: wave})
	if err != nil {
		cs.t.Fatal(err)
	}
	if _, err := cs.entities.Put(context.Background(), domain.CampaignEntityKey(id, domain.MustKey(resourceID)), b); err != nil {
		cs.t.Fatal(err)
	}
}

func (cs *campaignStore) publishEvent(ev campaign.Event) {
	b, err := ev.Encode()
	if err != nil {
		cs.t.Fatal(err)
	}
	if _, err := cs.js.Publish(context.Background(), ev.Subject(), b); err != nil {
		cs.t.Fatal(err)
	}
}

func TestCampaignPages_StatusPhasesWavesAndBurndown(t *testing.T) {
	s := startStack(t, web.Config{})
	var list web.CampaignsPage
	if getJSON(t, s.url+"/campaigns", &list); !list.Available || len(list.Campaigns) != 0 {
		t.Fatalf("before any campaign (the buckets provisioned, empty): %+v", list)
	}
	spec, rej := campaignspec.ParseSpec([]byte(campaignSpec))
	if rej != nil {
		t.Fatal(rej)
	}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := campaign.NewCampaign(spec, created)
	cs := newCampaignStore(t, s.env.JS)
	cs.putCampaign(c)
	ids := []string{rid("s1", "a"), rid("s1", "b"), rid("s2", "c"), rid("s2", "d")}
	for i, id := range ids {
		cs.putEntity(c.ID, id, i/2, campaign.PhasePlanned)
	}
	var counts campaign.Counts
	counts.Add(campaign.PhasePlanned, 4)
	cs.publishEvent(campaign.Event{Campaign: c.ID, Type: campaign.EventCreated, Status: campaign.StatusPlanning, Generation: 1, Phases: counts, At: created})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := events(t, ctx, s.url+"/campaigns/"+c.ID)
	testenv.Eventually(t, 5*time.Second, "the campaign listed", func() bool {
		getJSON(t, s.url+"/campaigns", &list)
		return len(list.Campaigns) == 1 && list.Campaigns[0].Entities == 4
	})
	// The canary succeeds: the burndown moves, live.
	cs.putEntity(c.ID, ids[0], 0, campaign.PhaseSucceeded)
	cs.putEntity(c.ID, ids[1], 0, campaign.PhaseFailed)
	within(t, live, "change", 2*time.Second)
	var p web.CampaignPage
	testenv.Eventually(t, 5*time.Second, "the phases counted", func() bool {
		getJSON(t, s.url+"/campaigns/"+c.ID, &p)
		return p.Done == 1 && p.Finished == 2 // the two writes may be applied one at a time
	})
	if p.Status != campaign.StatusPlanning || p.Entities != 4 || p.Finished != 2 || p.Phases.Of(campaign.PhaseFailed) != 1 || p.Reason != "PUCM: control plane upgrade" {
		t.Errorf("report: %+v", p.Report)
	}
	if len(p.Waves) != 2 || p.Waves[0].Name != "canary" || p.Waves[0].Entities != 2 || p.Waves[0].Phases.Of(campaign.PhaseSucceeded) != 1 || p.Waves[1].Entities != 2 || p.Waves[0].Gate != "manual" {
		t.Errorf("waves: %+v", p.Waves)
	}
	if b := p.Burndown; len(b) != 2 || b[0].Event != "created" || b[0].Remaining != 4 || b[1].Event != "" || b[1].Remaining != 3 || b[1].Failed != 1 {
		t.Errorf("burndown: %+v", b)
	}
	code, html := get(t, s.url+"/campaigns/"+c.ID, "text/html")
	if code != http.StatusOK || !contains(html, `data-phase="succeeded">1<`, `<polyline class="line" points="0.0,0.0 600.0,0.0 600.0,50.0">`) {
		t.Errorf("campaign page HTML: %d\n%s", code, html)
	}
	var e struct{ Status int }
	if code := getJSON(t, s.url+"/campaigns/nope", &e); code != http.StatusNotFound {
		t.Errorf("an unknown campaign: %d", code)
	}
	if code := getJSON(t, s.url+"/campaigns/Not.An.Id", &e); code != http.StatusNotFound {
		t.Errorf("an invalid id: %d", code)
	}
}

func contains(b []byte, subs ...string) bool {
	for _, s := range subs {
		if !strings.Contains(string(b), s) {
			return false
		}
	}
	return true
}
