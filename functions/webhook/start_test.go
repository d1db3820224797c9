package webhook_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/webhook"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// History of events and notices, then webhooks enabled: a new subscription delivers none of
// it, whatever the feed is doing when the subscription is created, and exactly the next event;
// with FromStart it delivers what the feed keeps (what was stored since the feed began).
func TestWebhook_NewSubscriptionOnHistoryStartsAtNewEvents(t *testing.T) {
	const events, notices = 3000, 1000
	for _, c := range []struct {
		name string
		// feed makes the feed on the history; it returns how many of the history's messages the
		// subscription must deliver with FromStart (0: it runs without).
		feed func(t *testing.T, env *testenv.Env) (fromStart int)
		// during runs once the subscription's consumer exists, with what it recorded.
		during func(t *testing.T, env *testenv.Env, info *jetstream.ConsumerInfo)
	}{
		{name: "feed created with the subscription", feed: provisionFeed},
		{name: "feed still copying the history", feed: func(t *testing.T, env *testenv.Env) int {
			// As earlier provisioning made it: sources without a start, so it copies everything.
			cfg, _ := provision.Config{Webhooks: true}.WithDefaults()
			streams := provision.Streams(cfg)
			if _, err := env.JS.CreateStream(context.Background(), streams[len(streams)-1]); err != nil {
				t.Fatal(err)
			}
			return 0
		}, during: func(t *testing.T, env *testenv.Env, info *jetstream.ConsumerInfo) {
			if copied := info.Config.OptStartSeq - 1; copied >= events+notices {
				t.Fatalf("the feed had copied all %d messages when the subscription was created: the case is not exercised", copied)
			}
			t.Logf("the feed had copied %d of %d messages when the subscription was created", info.Config.OptStartSeq-1, events+notices)
			waitFeed(t, env, events+notices)
		}},
		{name: "feed re-created", feed: func(t *testing.T, env *testenv.Env) int {
			provisionFeed(t, env)
			publish(t, env.JS, 2*events, 100, 100) // copied into the first feed
			waitFeed(t, env, 200)
			if err := env.JS.DeleteStream(context.Background(), domain.WebhookStream); err != nil {
				t.Fatal(err)
			}
			return provisionFeed(t, env)
		}},
		{name: "from the start: what the feed keeps", feed: func(t *testing.T, env *testenv.Env) int {
			provisionFeed(t, env)
			publish(t, env.JS, events, 40, 10) // after the feed began: kept
			waitFeed(t, env, 50)
			return 50
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t, testenv.WithProvision(func(p *provision.Config) { p.Webhooks = false }))
			publish(t, env.JS, 0, events, notices)
			fromStart := c.feed(t, env)
			onlyNewOrKept(t, env, fromStart, c.during)
		})
	}
}

// onlyNewOrKept starts subscription crm (with FromStart when fromStart > 0) and checks that,
// once the feed is copied and the subscription settled, it delivered fromStart messages, then
// exactly one for one new event.
func onlyNewOrKept(t *testing.T, env *testenv.Env, fromStart int, during func(*testing.T, *testenv.Env, *jetstream.ConsumerInfo)) {
	t.Helper()
	rc := newReceiver(t, nil)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("crm", srv.URL)}, FromStart: fromStart > 0})
	c, err := env.JS.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer("crm"))
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(t, env, c.CachedInfo())
	}
	testenv.WebhookSettled(t, env.JS, "crm", time.Minute)
	if got := len(rc.requests()); got != fromStart {
		t.Fatalf("%d deliveries of the history, want %d", got, fromStart)
	}
	fresh := publishEvent(t, env.JS, cluster(1), 1_000_000, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "the new event delivered", func() bool { return len(rc.requests()) > fromStart })
	testenv.WebhookSettled(t, env.JS, "crm", time.Minute)
	got := rc.requests()
	if len(got) != fromStart+1 || got[len(got)-1].id != fresh {
		t.Fatalf("after one new event: %d deliveries (last %s), want %d ending with %s", len(got), got[len(got)-1].id, fromStart+1, fresh)
	}
}

// provisionFeed provisions the webhook feed on what the server holds; nothing of the history
// is for a subscription to deliver.
func provisionFeed(t *testing.T, env *testenv.Env) int {
	t.Helper()
	cfg := env.Config
	cfg.Webhooks = true
	if _, err := provision.Run(context.Background(), env.JS, cfg); err != nil {
		t.Fatal(err)
	}
	return 0
}

// publish stores events outcome events and notices notices of distinct clusters (numbered from
// first), as the functions do, as fast as the server takes them.
func publish(t *testing.T, js jetstream.JetStream, first, events, notices int) {
	t.Helper()
	var futures []jetstream.PubAckFuture
	add := func(m *nats.Msg) {
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for i := first; i < first+max(events, notices); i++ {
		res := cluster(i)
		if i < first+events {
			add(eventMsg(res, i, domain.StatePending))
		}
		if i < first+notices {
			id := fmt.Sprintf("notice-%d", i)
			m := nats.NewMsg(domain.NoticeSubject(domain.MustKey(res)))
			m.Data = []byte(`{"noticeId":"` + id + `","kind":"due","resourceId":"` + res + `","state":"Pending"}`)
			m.Header.Set(domain.HeaderMsgID, id)
			domain.SetCloudEventHeaders(m.Header, domain.NoticeCEType("due"), id, res, time.Now())
			add(m)
		}
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("publish: no ack")
		}
	}
}

// waitFeed waits until the feed holds n messages.
func waitFeed(t *testing.T, env *testenv.Env, n uint64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d messages in the feed", n), func() bool {
		s, err := env.JS.Stream(context.Background(), domain.WebhookStream)
		return err == nil && s.CachedInfo().State.Msgs >= n
	})
}

// Replicas starting at once with a new subscription, while events are stored (so that each
// reads another start), agree on one consumer: the one that creates it wins, the others take
// it.
func TestWebhook_ReplicasCreatingOneSubscriptionAtOnce(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = env.JS.PublishMsg(ctx, eventMsg(cluster(i), i, domain.StatePending))
		}
	}()
	s := sub("crm", "http://127.0.0.1:1/hook")
	errs := make(chan error, 8)
	for range cap(errs) {
		go func() {
			_, err := webhook.New(context.Background(), env.JS, webhook.Config{Subscriptions: []webhook.Subscription{s}, Log: testenv.Quiet()})
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("a replica starting beside others: %v", err)
		}
	}
}
