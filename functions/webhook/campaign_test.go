package webhook_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/functions/webhook"
	"maintsignals/shared/campaign"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// A campaign's events reach the webhooks beside the entities' outcome events, as CloudEvents
// whose subject is the campaign; a subscription selects them by type.
func TestWebhook_DeliversCampaignEvents(t *testing.T) {
	env := testenv.Start(t)
	all, created := newReceiver(t, nil), newReceiver(t, nil)
	srvAll, srvCreated := httptest.NewServer(all), httptest.NewServer(created)
	t.Cleanup(srvAll.Close)
	t.Cleanup(srvCreated.Close)
	onlyCreated := sub("created", srvCreated.URL)
	onlyCreated.Types = []string{string(campaign.EventCreated)}
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("all", srvAll.URL), onlyCreated}})

	publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	for i, typ := range []campaign.EventType{campaign.EventCreated, campaign.EventProgress} {
		ev := campaign.Event{ID: "campaign.pucm." + string(rune('1'+i)) + "." + typ.Short(), Campaign: "pucm", Type: typ, Status: campaign.StatusActive, At: time.Now().UTC()}
		m, err := ev.Message()
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(ev.Subject())
		msg.Data = m.Body
		msg.Header.Set(domain.HeaderMsgID, m.ID)
		domain.SetCloudEventHeaders(msg.Header, m.Type, m.ID, "pucm", m.Time)
		if _, err := env.JS.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "every event delivered", func() bool { return len(all.succeeded()) == 3 && len(created.succeeded()) == 1 })
	time.Sleep(200 * time.Millisecond)
	if got := created.succeeded(); len(got) != 1 || got[0].ceType != string(campaign.EventCreated) || got[0].subject != "pucm" {
		t.Errorf("the created subscription got %+v", got)
	}
	if _, err := webhook.Parse([]byte(`[{"name":"x","url":"https://h/","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw","types":["io.maintsignals.campaign.halted"]}]`)); err != nil {
		t.Errorf("a campaign event type refused: %v", err)
	}
}
